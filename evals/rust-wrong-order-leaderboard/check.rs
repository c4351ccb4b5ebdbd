use ws::*;

fn entry(name: &str, score: u32) -> Entry {
    Entry { name: name.to_string(), score }
}

#[test]
fn ties_keep_their_order() {
    let entries = vec![entry("a", 1), entry("b", 7), entry("c", 7), entry("d", 2)];
    assert_eq!(podium(entries, 3), ["b", "c", "d"]);
}
