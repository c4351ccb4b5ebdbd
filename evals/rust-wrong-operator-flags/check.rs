use ws::*;

#[test]
fn revoke_clears_only_the_given_bits() {
    assert_eq!(revoke(READ | SHARE, WRITE | SHARE), READ);
    assert_eq!(revoke(0, READ), 0);
    assert!(!allows(revoke(READ | WRITE | SHARE, SHARE), SHARE));
}
