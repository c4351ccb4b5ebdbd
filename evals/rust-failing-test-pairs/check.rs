use ws::*;

#[test]
fn pairs() {
    let p = parse_pairs("a=1;b=2;;c = 3");
    assert_eq!(p.len(), 3);
    assert_eq!(p["c"], "3");
    assert!(parse_pairs("").is_empty());
}
