//! What must never leave the machine or reach a child process: the provider
//! key and other credentials.
//!
//! - [`credential_vars`]: the environment variables removed from every child
//!   agentfix starts (commands, language servers). The provider keys are
//!   always removed; other credential-shaped names (`*_API_KEY`, `*_TOKEN`,
//!   `*_SECRET`, `AWS_*`, …) unless the user's `envAllow` setting names them.
//! - [`Redactor`]: scrubs the key, and anything shaped like a credential
//!   (private key blocks, `sk-…` keys, AWS access key ids, bearer tokens,
//!   `Authorization:` values), from text that is shown, logged or recorded.
//!
//! Patterns are matched with the `regex` crate (already in the tree through
//! ripgrep's crates) and compiled once.

use std::borrow::Cow;
use std::ffi::OsString;
use std::sync::LazyLock;

use regex::Regex;

/// The provider keys: removed from every child, whatever `envAllow` says.
pub const PROVIDER_KEY_VARS: &[&str] = &["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "AGENTFIX_API_KEY"];

/// Names of credential variables removed from children unless allowed:
/// `*` stands for any run of characters; matched without regard to case.
pub const CREDENTIAL_VAR_PATTERNS: &[&str] = &[
    "*_API_KEY",
    "*_APIKEY",
    "*_ACCESS_KEY",
    "*_ACCESS_KEY_ID",
    "*_PRIVATE_KEY",
    "*_SECRET",
    "*_SECRET_KEY",
    "*_SECRETS",
    "*_TOKEN",
    "*_PASSWORD",
    "*_PASSWD",
    "*_CREDENTIALS",
    "*_AUTH",
    "AWS_*",
    "AZURE_CLIENT_SECRET",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "SSH_AUTH_SOCK",
    "GPG_AGENT_INFO",
    "DOCKER_AUTH_CONFIG",
    "NETRC",
];

fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.to_ascii_uppercase(), name.to_ascii_uppercase());
    match p.split_once('*') {
        None => p == n,
        Some((prefix, suffix)) => {
            n.len() >= prefix.len() + suffix.len() && n.starts_with(prefix) && n.ends_with(suffix)
        }
    }
}

/// Whether the variable `name` must be removed from a child's environment;
/// `allow` is the user's `envAllow` (exact names or `*` patterns).
pub fn is_credential_var(name: &str, allow: &[String]) -> bool {
    if PROVIDER_KEY_VARS.iter().any(|k| k.eq_ignore_ascii_case(name)) {
        return true;
    }
    if allow.iter().any(|a| glob_match(a, name)) {
        return false;
    }
    CREDENTIAL_VAR_PATTERNS.iter().any(|p| glob_match(p, name))
}

/// The variables of this process's environment that a child must not inherit.
pub fn credential_vars(allow: &[String]) -> Vec<OsString> {
    std::env::vars_os()
        .map(|(k, _)| k)
        .filter(|k| k.to_str().is_none_or(|name| is_credential_var(name, allow)))
        .collect()
}

/// The variables of this process's environment that a command or an MCP
/// server keeps (provisional: the allow list is being written).
pub fn allowed_env(allow: &[String]) -> Vec<(OsString, OsString)> {
    const KEEP: &[&str] = &[
        "PATH",
        "HOME",
        "LANG",
        "LANGUAGE",
        "LC_*",
        "TERM",
        "TZ",
        "USER",
        "LOGNAME",
        "CARGO_HOME",
        "RUSTUP_HOME",
        "RUSTUP_TOOLCHAIN",
        "VIRTUAL_ENV",
        "PYENV_ROOT",
        "PYENV_VERSION",
        "PYTHONPATH",
        "NODE_PATH",
        "NVM_DIR",
    ];
    std::env::vars_os()
        .filter(|(k, _)| {
            k.to_str().is_some_and(|name| {
                !PROVIDER_KEY_VARS.iter().any(|p| p.eq_ignore_ascii_case(name))
                    && (KEEP.iter().any(|p| glob_match(p, name)) || allow.iter().any(|a| glob_match(a, name)))
            })
        })
        .collect()
}

/// What a redacted value is replaced with.
pub const REDACTED: &str = "[REDACTED]";

static PATTERNS: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        // PEM private keys (RSA, EC, OPENSSH, ENCRYPTED, PGP blocks), also cut off.
        (r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----(?s:.*?)(-----END [A-Z0-9 ]*-----|\z)", REDACTED),
        // Anthropic and OpenAI keys.
        (r"\bsk-ant-[A-Za-z0-9_\-]{16,}", REDACTED),
        (r"\bsk-[A-Za-z0-9_\-]{20,}", REDACTED),
        // AWS access key ids.
        (r"\b(AKIA|ASIA)[0-9A-Z]{16}\b", REDACTED),
        // GitHub and Slack tokens.
        (r"\b(gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})", REDACTED),
        (r"\bxox[abprs]-[A-Za-z0-9\-]{10,}", REDACTED),
        // Header-shaped values: `Authorization: Bearer x`, `"x-api-key": "x"`, `api_key=x`.
        (
            r#"(?i)\b(authorization|proxy-authorization|x-api-key|api[_-]?key|access[_-]?token|secret)(["']?\s*[:=]\s*["']?)((bearer|basic|token)\s+)?[^\s"',;}]{6,}"#,
            "${1}${2}${3}[REDACTED]",
        ),
        (r"(?i)\bbearer\s+[A-Za-z0-9._~+/=\-]{8,}", "Bearer [REDACTED]"),
    ]
    .into_iter()
    .map(|(p, r)| (Regex::new(p).expect("valid secret pattern"), r))
    .collect()
});

/// Scrubs known secrets and credential-shaped strings from text.
#[derive(Clone, Default)]
pub struct Redactor {
    /// Exact secrets (the API key); shorter ones are not matched (too many
    /// false hits), but a key is never that short.
    secrets: Vec<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} secrets)", self.secrets.len())
    }
}

impl Redactor {
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Self {
        Self { secrets: secrets.into_iter().filter(|s| s.trim().len() >= 4).collect() }
    }

    /// `text` without the known secrets (only them).
    pub fn redact_exact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = Cow::Owned(out.replace(s.as_str(), REDACTED));
            }
        }
        out
    }

    /// `text` without the known secrets and credential-shaped strings.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = self.redact_exact(text);
        for (re, with) in PATTERNS.iter() {
            if re.is_match(&out) {
                out = Cow::Owned(re.replace_all(&out, *with).into_owned());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_keys_are_always_credentials_and_others_can_be_allowed() {
        let allow = vec!["NPM_TOKEN".to_string(), "ANTHROPIC_API_KEY".to_string(), "MY_*".to_string()];
        for name in ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "AGENTFIX_API_KEY", "anthropic_api_key"] {
            assert!(is_credential_var(name, &allow), "{name}");
        }
        for name in
            ["GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "STRIPE_SECRET", "DB_PASSWORD", "SSH_AUTH_SOCK"]
        {
            assert!(is_credential_var(name, &[]), "{name}");
        }
        assert!(!is_credential_var("NPM_TOKEN", &allow));
        assert!(!is_credential_var("MY_API_KEY", &allow));
        for name in ["PATH", "HOME", "CARGO_TARGET_DIR", "TOKENIZERS_PARALLELISM", "LANG"] {
            assert!(!is_credential_var(name, &[]), "{name}");
        }
    }

    #[test]
    fn known_secrets_and_credential_shapes_are_scrubbed() {
        let r = Redactor::new(["my-very-secret-key".to_string()]);
        let text = "error: invalid key my-very-secret-key (header x-api-key: my-very-secret-key)\n\
            Authorization: Bearer abc.def.ghijklmnop\n\
            key sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA and sk-proj-BBBBBBBBBBBBBBBBBBBBBBBB\n\
            aws AKIAIOSFODNN7EXAMPLE\n\
            -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n-----END OPENSSH PRIVATE KEY-----\nafter\n\
            {\"api_key\": \"zzzzzzzzzz\"} ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        let out = r.redact(text);
        for leak in [
            "my-very-secret-key",
            "abc.def",
            "AAAAAAAA",
            "BBBBBBBB",
            "AKIAIOSFODNN7EXAMPLE",
            "b3BlbnNz",
            "zzzzzzzzzz",
            "ghp_abc",
        ] {
            assert!(!out.contains(leak), "{leak} leaked in {out}");
        }
        assert!(out.contains("Authorization: Bearer [REDACTED]"), "{out}");
        assert!(out.contains("\nafter\n"), "{out}");
        // Ordinary text is untouched and not copied.
        assert!(matches!(r.redact("def tokenize(secret_sauce): pass"), Cow::Borrowed(_)));
        // A private key cut off by a size limit is still removed.
        let cut = Redactor::default().redact("x\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow").into_owned();
        assert_eq!(cut, "x\n[REDACTED]");
    }
}
