//! Request bodies written from the encodings of messages kept between
//! requests.
//!
//! A run's history only grows: every turn sends all of it again. Encoding
//! it anew each time (a `Value` per message, every string escaped again)
//! costs a time that grows with the history, turn after turn. A message's
//! encoding depends only on the message, so each client keeps the JSON
//! text of the messages it sent, by revision (`ModelRequest::revisions`:
//! a message that changes gets a new one), and writes the next body from
//! it: only the new messages, and those whose encoding depends on where
//! they are (Anthropic's cache breakpoints on the newest user messages),
//! are encoded.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::model::Message;

/// The encoded messages of a client's last request, by revision.
#[derive(Debug, Default)]
pub struct Encoded {
    texts: Mutex<HashMap<u64, Arc<str>>>,
}

impl Encoded {
    /// The JSON texts of `messages`, in order: `placed(i)` for a message
    /// whose encoding depends on its place (none, empty texts left out),
    /// else the text kept for its revision, else `encode(message)`, kept
    /// for the next request. Without revisions (or not one per message)
    /// everything is encoded. Only this request's texts are kept.
    pub fn texts(
        &self,
        messages: &[Message],
        revisions: &[u64],
        mut placed: impl FnMut(usize) -> Option<String>,
        encode: impl Fn(&Message) -> String,
    ) -> Vec<Arc<str>> {
        let tracked = revisions.len() == messages.len();
        let mut kept = self.texts.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = HashMap::with_capacity(if tracked { messages.len() } else { 0 });
        let mut texts = Vec::with_capacity(messages.len());
        for (i, m) in messages.iter().enumerate() {
            if let Some(text) = placed(i) {
                texts.push(Arc::from(text));
                continue;
            }
            if !tracked {
                texts.push(Arc::from(encode(m)));
                continue;
            }
            let text = kept.remove(&revisions[i]).unwrap_or_else(|| Arc::from(encode(m)));
            debug_assert_eq!(*text, *encode(m), "message {i} changed but kept its revision");
            next.insert(revisions[i], text.clone());
            texts.push(text);
        }
        if tracked {
            *kept = next;
        }
        texts
    }
}

/// A request body: every member but the messages as a `Value` (small, and
/// changed by a retry without streaming), the messages as JSON texts.
#[derive(Debug, Clone)]
pub struct Body {
    pub head: Value,
    /// The member the messages go in.
    key: &'static str,
    messages: Vec<Arc<str>>,
}

impl Body {
    pub fn new(head: Value, key: &'static str, messages: Vec<Arc<str>>) -> Self {
        Self { head, key, messages }
    }

    /// The body's JSON: `head` with the messages' array added as `key`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let head = serde_json::to_vec(&self.head).unwrap_or_else(|_| b"{}".to_vec());
        let size: usize = self.messages.iter().map(|m| m.len() + 1).sum();
        let mut out = Vec::with_capacity(head.len() + self.key.len() + size + 8);
        out.extend_from_slice(&head[..head.len().saturating_sub(1)]);
        if head.len() > 2 {
            out.push(b',');
        }
        out.push(b'"');
        out.extend_from_slice(self.key.as_bytes());
        out.extend_from_slice(b"\":[");
        let mut first = true;
        for m in self.messages.iter().filter(|m| !m.is_empty()) {
            if !first {
                out.push(b',');
            }
            first = false;
            out.extend_from_slice(m.as_bytes());
        }
        out.extend_from_slice(b"]}");
        out
    }

    /// The whole body as a `Value` (for tests and transcripts).
    pub fn to_value(&self) -> Value {
        serde_json::from_slice(&self.to_bytes()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Block, Role, next_revision};
    use serde_json::json;

    fn encode(m: &Message) -> String {
        serde_json::to_string(&m.text()).unwrap()
    }

    #[test]
    fn kept_texts_are_reused_by_revision_and_changed_messages_encoded_again() {
        let encoded = Encoded::default();
        let mut messages = vec![Message::user_text("a \"quoted\" 漢字"), Message::user_text("b")];
        let mut revisions = vec![next_revision(), next_revision()];
        let first = encoded.texts(&messages, &revisions, |_| None, encode);
        assert_eq!(&*first[0], r#""a \"quoted\" 漢字""#);
        // The same messages again: the texts kept are sent.
        let again = encoded.texts(&messages, &revisions, |_| None, encode);
        assert_eq!(first, again);
        assert!(Arc::ptr_eq(&first[0], &again[0]), "a kept text is reused, not re-encoded");
        // One changed, one added, one placed: only those are new.
        messages[1].content = vec![Block::Text { text: "b2".into() }];
        revisions[1] = next_revision();
        messages.push(Message { role: Role::User, content: vec![Block::Text { text: "c".into() }], raw: None });
        revisions.push(next_revision());
        let texts = encoded.texts(&messages, &revisions, |i| (i == 2).then(|| "\"placed\"".to_string()), encode);
        assert!(Arc::ptr_eq(&texts[0], &first[0]));
        assert_eq!(&*texts[1], "\"b2\"");
        assert_eq!(&*texts[2], "\"placed\"");
        // Without revisions, everything is encoded and nothing kept.
        let plain = encoded.texts(&messages, &[], |_| None, encode);
        assert!(!Arc::ptr_eq(&plain[0], &first[0]));
    }

    #[test]
    fn a_body_is_its_head_with_the_messages_added() {
        let body = Body::new(
            json!({"model": "m", "stream": true}),
            "messages",
            vec![Arc::from("{\"role\":\"user\"}"), Arc::from(""), Arc::from("2")],
        );
        assert_eq!(body.to_value(), json!({"model": "m", "stream": true, "messages": [{"role": "user"}, 2]}));
        let empty = Body::new(json!({}), "messages", vec![]);
        assert_eq!(empty.to_value(), json!({"messages": []}));
    }
}
