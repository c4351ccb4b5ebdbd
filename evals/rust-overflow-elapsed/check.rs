use ws::*;

#[test]
fn never_negative() {
    assert_eq!(elapsed_ms(5, 5), 0);
    assert_eq!(elapsed_ms(9, 1), 0);
    assert_eq!(slowest(&[(10, 5), (0, 7)]), 7);
    assert_eq!(elapsed_ms(0, u64::MAX), u64::MAX);
}
