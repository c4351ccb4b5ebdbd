//! Previews of chat messages in notifications.

/// The first `max` characters of `text`, with `…` appended when it was cut.
pub fn preview(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    format!("{}…", &text[..max])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut() {
        assert_eq!(preview("hello world", 5), "hello…");
    }

    #[test]
    fn short_messages_are_whole() {
        assert_eq!(preview("hi", 5), "hi");
    }
}
