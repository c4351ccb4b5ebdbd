//! Permission bits of a shared document.

pub const READ: u8 = 0b001;
pub const WRITE: u8 = 0b010;
pub const SHARE: u8 = 0b100;

/// Whether `granted` has every bit of `wanted`.
pub fn allows(granted: u8, wanted: u8) -> bool {
    granted & wanted == wanted
}

/// `granted` with the bits of `added`.
pub fn grant(granted: u8, added: u8) -> u8 {
    granted | added
}

/// `granted` without the bits of `revoked`.
pub fn revoke(granted: u8, revoked: u8) -> u8 {
    granted ^ revoked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revoking_write_keeps_read() {
        assert_eq!(revoke(READ | WRITE, WRITE), READ);
    }

    #[test]
    fn revoking_what_was_never_granted_changes_nothing() {
        assert_eq!(revoke(READ, WRITE), READ);
    }

    #[test]
    fn grants_add_up() {
        assert!(allows(grant(READ, SHARE), READ | SHARE));
    }
}
