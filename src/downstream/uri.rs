//! `file:` URIs for the downstream servers, without LSP types: paths are
//! percent-encoded like VS Code does (everything but unreserved characters
//! and `/`), and decoded leniently.

use std::path::{Path, PathBuf};

pub fn path_to_uri(path: &Path) -> String {
    let mut out = String::from("file://");
    for b in path.to_string_lossy().bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

pub fn uri_to_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(b) = std::str::from_utf8(&bytes[i + 1..(i + 3).min(bytes.len())])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok().map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_spaces_and_cjk() {
        let p = Path::new("/w/my dir/漢字 😀.py");
        let u = path_to_uri(p);
        assert_eq!(u, "file:///w/my%20dir/%E6%BC%A2%E5%AD%97%20%F0%9F%98%80.py");
        assert_eq!(uri_to_path(&u).unwrap(), p);
        assert_eq!(uri_to_path("file:///c%3A/x").unwrap(), Path::new("/c:/x"));
        assert_eq!(uri_to_path("untitled:1"), None);
    }
}
