use ws::*;

#[test]
fn blank_messages_have_no_command() {
    assert_eq!(command(""), "");
    assert_eq!(command("   \n"), "");
    assert_eq!(command("/Help me"), "/help");
    assert!(arguments("").is_empty());
}
