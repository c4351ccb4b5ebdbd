use std::collections::HashMap;

use ws::*;

#[test]
fn ports() {
    let env = |v: &str| HashMap::from([("PORT".to_string(), v.to_string())]);
    assert_eq!(port(&env("443")), 443);
    assert_eq!(port(&env("70000")), DEFAULT_PORT);
    assert_eq!(port(&env("")), DEFAULT_PORT);
    assert_eq!(port(&HashMap::new()), DEFAULT_PORT);
}
