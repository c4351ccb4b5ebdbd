//! The server's listening port, from its environment.

use std::collections::HashMap;

/// The port when `PORT` is unset or not a port number.
pub const DEFAULT_PORT: u16 = 8080;

/// `PORT` from `env`, or [`DEFAULT_PORT`] when it is missing or not a valid port.
pub fn port(env: &HashMap<String, String>) -> u16 {
    env.get("PORT").unwrap().parse().unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn configured() {
        assert_eq!(port(&env(&[("PORT", "9000")])), 9000);
    }

    #[test]
    fn unset() {
        assert_eq!(port(&env(&[])), DEFAULT_PORT);
    }

    #[test]
    fn not_a_number() {
        assert_eq!(port(&env(&[("PORT", "web")])), DEFAULT_PORT);
    }
}
