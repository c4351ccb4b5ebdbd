use ws::*;

#[test]
fn counts() {
    assert_eq!(page_count(0, 10), 0);
    assert_eq!(page_count(1, 10), 1);
    assert_eq!(page_count(30, 10), 3);
    assert_eq!(page_count(31, 10), 4);
}
