use ws::*;

#[test]
fn characters_not_bytes() {
    assert_eq!(preview("héllo wörld", 5), "héllo…");
    assert_eq!(preview("日本語のテキスト", 3), "日本語…");
    assert_eq!(preview("ab", 2), "ab");
}
