use ws::*;

#[test]
fn counts_characters_not_bytes() {
    assert_eq!(count_long(&[], 1), 0);
    assert_eq!(count_long(&["héllo", "hi"], 5), 1);
}
