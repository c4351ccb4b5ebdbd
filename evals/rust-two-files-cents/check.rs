use ws::cart::receipt_total;
use ws::money::parse_cents;

#[test]
fn cents() {
    assert_eq!(parse_cents("12.5"), Some(1250));
    assert_eq!(parse_cents("0.07"), Some(7));
    assert_eq!(parse_cents("3"), Some(300));
    assert_eq!(parse_cents("1.234"), None);
    assert_eq!(receipt_total(&["tea 1.5", "cake 4"]), Some(550));
}
