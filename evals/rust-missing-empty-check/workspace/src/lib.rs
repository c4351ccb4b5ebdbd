//! Command-line parsing of a chat bot's messages.

/// The command of a message: its first word, lowercased (`"/Help me"` -> `"/help"`).
pub fn command(message: &str) -> String {
    message.split_whitespace().next().unwrap().to_lowercase()
}

/// The words after the command.
pub fn arguments(message: &str) -> Vec<&str> {
    message.split_whitespace().skip(1).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_lowercased() {
        assert_eq!(command("/Help me"), "/help");
    }

    #[test]
    fn arguments_follow_the_command() {
        assert_eq!(arguments("/roll 2 d6"), ["2", "d6"]);
    }
}
