//! What must never leave the machine or reach a child process: the provider
//! key and other credentials.
//!
//! - [`allowed_env`]: the environment a command or an MCP server gets: a short allow list of variables
//!   that carry no secrets ([`KEPT_ENV`]: `PATH`, `HOME`, the locale, the
//!   toolchains' homes and versions) plus what the user's `envAllow` names,
//!   never the provider keys. Anything not named is left out, so a secret
//!   under a name nobody thought of (`SECRET_KEY`, `DATABASE_URL`,
//!   `SENTRY_DSN`) is left out too.
//! - [`credential_vars`]: the variables removed from the environment of the
//!   children that keep the rest of it (language servers: the user's own
//!   tools, which need what the user's shell gives them). The provider keys
//!   are always removed; other credential-shaped names
//!   ([`CREDENTIAL_VAR_PATTERNS`]: `*_API_KEY`, `*TOKEN`, `*PASSWORD*`,
//!   `*_DSN`, `DATABASE_URL`, `AWS_*`, …) unless `envAllow` names them.
//! - [`Redactor`]: scrubs the key, and anything shaped like a credential,
//!   from text that is shown, logged, recorded or sent to the model. It has
//!   two strengths, because what the model reads from a file it must be able
//!   to quote back in an edit:
//!   - [`Redactor::redact`], everything: the exact key, private key blocks
//!     (PEM, cut off or whole), tokens with a known prefix (`sk-`, `ghp_`,
//!     `AKIA`, `AIza`, `xoxb-`, JWTs, …), the password of a URL
//!     (`postgres://user:[REDACTED]@host`), Slack webhook paths, and the
//!     value of any assignment whose name says it is a secret
//!     (`GEMINI_API_KEY=…`, `password: …`, `"client_secret": "…"`,
//!     `Authorization: Bearer …`). For transcripts, logs, messages to the
//!     user, and what commands, MCP servers and diagnostics tell the model:
//!     text nobody edits, where a credential is most likely to be printed
//!     (`cat ~/.ssh/id_rsa`, `env`, a failing test that dumps its config).
//!   - [`Redactor::redact_file_text`], the exact key and the high-confidence
//!     shapes only (private key blocks, prefixed tokens, URL passwords,
//!     Slack webhooks), not the assignment rule: for the tools that show the
//!     workspace's files (`read_file`, `grep`, the symbol tools, the
//!     results of edits). Source code is full of `token = "…"` fixtures and
//!     `password: …` settings the model may have to edit, and an
//!     `old_text` with `[REDACTED]` in it cannot match the file (`edit_file`
//!     says so rather than edit anything).
//!
//!   The assignment rule keeps false positives down by asking that the value
//!   look like a literal: at least 6 characters, no space, not a call
//!   (`reverse(…)`), not an identifier or a field path in code
//!   (`token = get_token`, `password: Optional[str]`, `api_key =
//!   os.environ[…]`), not a placeholder (`${DB_PASSWORD}`, `%(pw)s`,
//!   `********`); and that the name say *secret* in a word of its own
//!   (`authToken`, `PGPASSWORD`, `x-api-key`, but not `tokenizer`, `author`,
//!   `sort_key`, a bare `key`, or a name ending in a word such as `_url`,
//!   `_file`, `_type` that describes the secret rather than holding it).
//!   Text with nothing to scrub is returned borrowed, not copied.
//!
//! Patterns are matched with the `regex` crate (already in the tree through
//! ripgrep's crates), compiled once into one expression per strength, so a
//! text is scanned once whatever the number of shapes; word boundaries are
//! ASCII (`(?-u:\b)`), which keeps the scan on the fast engine for text that
//! is not ASCII.
//!
//! Its parts:
//! what must not leave: the environment of commands and MCP servers by allow
//! list (`allowed_env`: `KEPT_ENV`, the variables that carry no secret, plus
//! `envAllow`, never the provider keys; `allowed_env_of` the pure function
//! under it), the credential variables removed from the environment of the
//! children that keep the rest (`credential_vars`: language servers), and
//! `Redactor`, which scrubs the key and credential-shaped strings (one
//! `regex` alternation per strength, each shape's match then checked in code:
//! a literal value, a name that says secret) in two strengths: `redact`
//! (every shape, the assignments `password: …` included) for text shown,
//! logged, recorded, and command, MCP and diagnostics output bound for the
//! model; `redact_file_text` (the key, PEM private keys, prefixed tokens, URL
//! passwords, webhooks) for the file tools' results, which the model quotes
//! back in edits

use std::borrow::Cow;
use std::ffi::OsString;
use std::sync::LazyLock;

use regex::{Captures, Regex};

/// The provider keys: never in a child's environment, whatever `envAllow` says.
pub const PROVIDER_KEY_VARS: &[&str] = &["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "AGENTFIX_API_KEY"];

/// The variables of agentfix's environment that MCP servers (and commands)
/// keep, by name or `*` pattern (matched without regard to case): the
/// system's basics, the locale, and the toolchains' homes, versions and
/// flags, none of which carries a secret. Left out on purpose, though they
/// look like toolchain settings: `CARGO_REGISTRY_TOKEN` and the other
/// `CARGO_*` (registry tokens), `BUNDLE_*` (`BUNDLE_<HOST>` holds
/// `user:password`), `NPM_CONFIG_*` and `PIP_INDEX_URL` (auth tokens and
/// URLs with passwords), `GOPROXY`, the proxies (`HTTPS_PROXY` may carry a
/// password), `*_OPTS` (`-D` flags carry passwords), `XDG_RUNTIME_DIR` and
/// `SSH_AUTH_SOCK` (agent and keyring sockets). `envAllow` adds any of them.
pub const KEPT_ENV: &[&str] = &[
    // The system.
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "FORCE_COLOR",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "TZ",
    "TMPDIR",
    "TMP",
    "TEMP",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    // Certificates (public), for servers behind a company's proxy.
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    // C and C++.
    "CC",
    "CXX",
    "AR",
    "LD",
    "CFLAGS",
    "CXXFLAGS",
    "CPPFLAGS",
    "LDFLAGS",
    "PKG_CONFIG_PATH",
    "LD_LIBRARY_PATH",
    "LIBRARY_PATH",
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    // Rust.
    "CARGO_HOME",
    "CARGO_TARGET_DIR",
    "CARGO_INCREMENTAL",
    "CARGO_TERM_COLOR",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "RUSTC_WRAPPER",
    "RUST_BACKTRACE",
    "RUST_LOG",
    "RUST_SRC_PATH",
    // Python.
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "CONDA_EXE",
    "PYENV_ROOT",
    "PYENV_VERSION",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONUNBUFFERED",
    "PYTHONIOENCODING",
    "PYTHONUTF8",
    "POETRY_HOME",
    "PIPX_HOME",
    "UV_CACHE_DIR",
    // JavaScript.
    "NODE_PATH",
    "NODE_OPTIONS",
    "NODE_ENV",
    "NVM_DIR",
    "NVM_BIN",
    "PNPM_HOME",
    "VOLTA_HOME",
    "COREPACK_HOME",
    "BUN_INSTALL",
    "DENO_DIR",
    // Go.
    "GOPATH",
    "GOROOT",
    "GOBIN",
    "GOFLAGS",
    "GOCACHE",
    "GOMODCACHE",
    "GOPRIVATE",
    "GOTOOLCHAIN",
    "GO111MODULE",
    "CGO_ENABLED",
    // The JVM.
    "JAVA_HOME",
    "GRADLE_USER_HOME",
    "MAVEN_HOME",
    "M2_HOME",
    "ANDROID_HOME",
    "ANDROID_SDK_ROOT",
    // Ruby.
    "GEM_HOME",
    "GEM_PATH",
    "BUNDLE_GEMFILE",
    "BUNDLE_PATH",
    "RBENV_ROOT",
    "RBENV_VERSION",
    // .NET.
    "DOTNET_ROOT",
    "DOTNET_CLI_TELEMETRY_OPTOUT",
    "NUGET_PACKAGES",
];

/// Names of credential variables removed from the children that inherit
/// the rest of the environment (language servers), unless allowed: `*`
/// stands for any run of characters, on either side or both; matched
/// without regard to case. `*TOKEN` rather than `*TOKEN*`, so that
/// `TOKENIZERS_PARALLELISM` stays.
pub const CREDENTIAL_VAR_PATTERNS: &[&str] = &[
    "*API_KEY",
    "*APIKEY",
    "*_KEY",
    "*_KEY_ID",
    "*ACCESS_KEY*",
    "*PRIVATE_KEY*",
    "*SECRET*",
    "*TOKEN",
    "*_TOKEN_*",
    "TOKEN_*",
    "*PASSWORD*",
    "*PASSWD*",
    "*_PWD",
    "*PASSPHRASE*",
    "*CREDENTIAL*",
    "*_AUTH",
    "*_DSN",
    "DSN",
    "DATABASE_URL",
    "*_DATABASE_URL",
    "REDIS_URL",
    "MONGODB_URI",
    "MONGO_URL",
    "AMQP_URL",
    "CELERY_BROKER_URL",
    "AWS_*",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "SSH_AUTH_SOCK",
    "GPG_AGENT_INFO",
    "DOCKER_AUTH_CONFIG",
    "NETRC",
];

/// Whether `name` matches `pattern`, where `*` stands for any run of
/// characters (anywhere in the pattern, any number of times), without
/// regard to ASCII case.
fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    // The classic greedy match with one backtrack point: the last `*`.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ni));
            pi += 1;
        } else if pi < p.len() && p[pi].eq_ignore_ascii_case(&n[ni]) {
            pi += 1;
            ni += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

fn is_provider_key(name: &str) -> bool {
    PROVIDER_KEY_VARS.iter().any(|k| k.eq_ignore_ascii_case(name))
}

/// Whether the variable `name` must be removed from a child's environment;
/// `allow` is the user's `envAllow` (exact names or `*` patterns).
pub fn is_credential_var(name: &str, allow: &[String]) -> bool {
    if is_provider_key(name) {
        return true;
    }
    if allow.iter().any(|a| glob_match(a, name)) {
        return false;
    }
    CREDENTIAL_VAR_PATTERNS.iter().any(|p| glob_match(p, name))
}

/// The variables of this process's environment that a child must not
/// inherit: for the children that keep the rest (language servers).
pub fn credential_vars(allow: &[String]) -> Vec<OsString> {
    std::env::vars_os()
        .map(|(k, _)| k)
        .filter(|k| k.to_str().is_none_or(|name| is_credential_var(name, allow)))
        .collect()
}

/// Whether a command or an MCP server keeps the variable `name`: it is in
/// [`KEPT_ENV`] or `allow` names it, and it is not a provider key.
pub fn is_kept_var(name: &str, allow: &[String]) -> bool {
    !is_provider_key(name)
        && KEPT_ENV.iter().copied().chain(allow.iter().map(String::as_str)).any(|p| glob_match(p, name))
}

/// The variables of `vars` that a command or an MCP server keeps (see
/// [`is_kept_var`]); a name that is not UTF-8 names nothing kept.
pub fn allowed_env_of(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    allow: &[String],
) -> Vec<(OsString, OsString)> {
    vars.into_iter().filter(|(k, _)| k.to_str().is_some_and(|name| is_kept_var(name, allow))).collect()
}

/// The variables of this process's environment that a command or an MCP
/// server keeps: [`KEPT_ENV`] (PATH, HOME, USER/LOGNAME, SHELL, the locale,
/// TERM, TZ, TMPDIR/TMP/TEMP, the toolchains' homes, versions and flags),
/// plus what `allow` (the user's `envAllow`: exact names or `*` patterns)
/// names. Never the provider keys, whatever `allow` says. The caller clears
/// the child's environment and sets these.
pub fn allowed_env(allow: &[String]) -> Vec<(OsString, OsString)> {
    allowed_env_of(std::env::vars_os(), allow)
}

/// What a redacted value is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// The shapes both strengths scrub, as named groups of one alternation.
const HIGH_CONFIDENCE: &[&str] = &[
    // A PEM private key (PKCS#8, RSA, EC, DSA, OPENSSH, ENCRYPTED, PGP): the
    // header, the body (base64, `Proc-Type:` lines, `\n` escapes in a
    // string), and the footer, or none when a size limit cut it off.
    r"(?P<pem>-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?P<pem_body>(?:[A-Za-z0-9+/=\s\\:,]|-[A-Za-z0-9])*)(?P<pem_end>-----END [A-Z0-9 ]*-----)?)",
    // Tokens with a known prefix.
    concat!(
        r"(?P<prefixed>(?-u:\b)(?:",
        r"sk-[A-Za-z0-9_\-]{20,}",                                         // Anthropic, OpenAI
        r"|(?:AKIA|ASIA)[0-9A-Z]{16}(?-u:\b)",                             // AWS access key ids
        r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}",       // GitHub
        r"|glpat-[A-Za-z0-9_\-]{20,}",                                     // GitLab
        r"|xox[abprs]-[A-Za-z0-9\-]{10,}",                                 // Slack
        r"|AIza[0-9A-Za-z_\-]{35}",                                        // Google
        r"|hf_[A-Za-z0-9]{30,}",                                           // Hugging Face
        r"|npm_[A-Za-z0-9]{36}",                                           // npm
        r"|pypi-AgEI[A-Za-z0-9_\-]{20,}",                                  // PyPI
        r"|SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}",                  // SendGrid
        r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}",                      // Stripe
        r"|eyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*", // JWT
        r"))",
    ),
    // The password of a URL, any scheme: `postgres://user:[REDACTED]@host`.
    r#"(?P<url>(?P<url_head>(?-u:\b)[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/?#@"'<>\x60\\]*:)(?P<url_pass>[^\s/?#@"'<>\x60\\]+)@)"#,
    // A Slack webhook's secret path.
    r"(?P<slack>(?P<slack_head>(?-u:\b)hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9/_\-]{8,})",
];

/// The shapes only [`Redactor::redact`] scrubs.
const GENERIC: &[&str] = &[
    // `NAME=value`, `NAME: value`, `"name": "value"`, `name => 'value'`,
    // `Authorization: Bearer value`, for a name with a secret's word in it.
    concat!(
        r#"(?P<assign>(?-u:\b)(?P<a_name>(?:[A-Za-z0-9_][A-Za-z0-9_.\-]*?)?(?i:key|secret|token|passw(?:or)?d|passphrase|pwd|credential|dsn|auth)[A-Za-z0-9_.\-]*)"#,
        r#"(?P<a_sep>\\?["']?[ \t]*(?:=>|:=|[:=])[ \t]*\\?["']?)"#,
        r#"(?P<a_scheme>(?i:bearer|basic|token|digest)[ \t]+)?"#,
        r#"(?P<a_value>[^\s"'\x60,;&(){}\[\]<>\\]+))"#,
    ),
    // A bearer token anywhere.
    r"(?P<bearer>(?P<bearer_head>(?-u:\b)(?i:bearer)[ \t]+)(?P<bearer_value>[A-Za-z0-9._~+/=\-]{8,}))",
];

static FILE_SHAPES: LazyLock<Regex> = LazyLock::new(|| shapes(HIGH_CONFIDENCE.iter()));
static ALL_SHAPES: LazyLock<Regex> = LazyLock::new(|| shapes(HIGH_CONFIDENCE.iter().chain(GENERIC)));

fn shapes<'a>(parts: impl Iterator<Item = &'a &'static str>) -> Regex {
    Regex::new(&parts.copied().collect::<Vec<_>>().join("|")).expect("valid secret pattern")
}

/// What the shape that matched in `caps` becomes, or `None` when the match
/// is no secret after all (see the module's doc for the rules).
fn replacement(caps: &Captures, text: &str) -> Option<String> {
    let end = caps.get(0).map_or(0, |m| m.end());
    if let Some(body) = caps.name("pem_body") {
        // A header alone is a program that looks for keys, not a key; one
        // cut off by a size limit is removed with whatever came of it.
        let base64 = body.as_str().bytes().filter(|b| b.is_ascii_alphanumeric() || b"+/".contains(b)).count();
        let whole = caps.name("pem_end").is_some() || end == text.len() || base64 >= 16;
        return whole.then(|| REDACTED.to_string());
    }
    if caps.name("prefixed").is_some() {
        return Some(REDACTED.to_string());
    }
    if let (Some(head), Some(pass)) = (caps.name("url_head"), caps.name("url_pass")) {
        return (!placeholder(pass.as_str())).then(|| format!("{}{REDACTED}@", head.as_str()));
    }
    if let Some(head) = caps.name("slack_head") {
        return Some(format!("{}{REDACTED}", head.as_str()));
    }
    if let (Some(name), Some(sep), Some(value)) = (caps.name("a_name"), caps.name("a_sep"), caps.name("a_value")) {
        let scheme = caps.name("a_scheme").map_or("", |m| m.as_str());
        let called = text[end..].starts_with(['(', '[']);
        let secret = names_a_secret(name.as_str())
            && !called
            && literal_value(name.as_str(), sep.as_str(), !scheme.is_empty(), value.as_str(), &text[end..]);
        return secret.then(|| format!("{}{}{scheme}{REDACTED}", name.as_str(), sep.as_str()));
    }
    if let (Some(head), Some(value)) = (caps.name("bearer_head"), caps.name("bearer_value")) {
        // `bearer authentication` is prose.
        let word = value.as_str().bytes().all(|b| b.is_ascii_lowercase());
        return (!word).then(|| format!("{}{REDACTED}", head.as_str()));
    }
    None
}

/// `${DB_PASSWORD}`, `$PGPASS`, `%(password)s`, `********`, `xxxxxx`,
/// `sk-ant-...`, or an earlier redaction: nothing to hide.
fn placeholder(value: &str) -> bool {
    value.starts_with(['$', '%', '{', '<'])
        || value.contains(REDACTED)
        || value.ends_with("...")
        || value.ends_with('…')
        || value.chars().all(|c| matches!(c, '*' | 'x' | 'X' | '.' | '•'))
}

/// `^1.10.0`, `~2.3`, `>=0.4.1-rc1`: a dependency's version (`"jsonwebtoken": "^9.0.0"`).
fn version(value: &str) -> bool {
    let v = value.trim_start_matches(['^', '~', '=', '<', '>', 'v']);
    v.starts_with(|c: char| c.is_ascii_digit())
        && v.contains('.')
        && v.bytes().all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
}

/// Words after the secret's that describe it rather than hold it
/// (`PASSWORD_FILE`, `token_url`, `auth_type`, `key_id`).
const DESCRIPTORS: &[&str] = &[
    "url", "uri", "endpoint", "host", "server", "domain", "path", "file", "dir", "type", "kind", "method", "mode",
    "scheme", "provider", "name", "id", "ids", "header", "field", "format", "prefix", "length", "len", "count",
    "limit", "expiry", "expires", "at", "ttl", "timeout", "enabled", "required", "reset", "policy", "hint", "env",
    "var", "budget", "usage", "used", "size", "total", "cost", "window", "max", "min",
];

/// Words that make a `*_key` no secret (`sort_key`, `public_key`).
const PLAIN_KEYS: &[&str] = &[
    "sort",
    "primary",
    "foreign",
    "cache",
    "partition",
    "lookup",
    "hot",
    "map",
    "dict",
    "unique",
    "index",
    "group",
    "row",
    "order",
    "join",
    "route",
    "public",
    "pub",
    "i18n",
    "translation",
    "idempotency",
    "dedup",
    "shortcut",
];

/// Words that name a secret themselves, or at their end (`pgpassword`,
/// `apikey`, `authtoken`).
const SECRET_ENDINGS: &[&str] = &[
    "secret",
    "token",
    "password",
    "passwd",
    "passphrase",
    "pwd",
    "credential",
    "dsn",
    "apikey",
    "secretkey",
    "privatekey",
    "accesskey",
    "signingkey",
    "masterkey",
    "authkey",
    "oauth",
];

/// The words of a name, lowercased: split at every character that is no
/// letter or digit, and where the case changes (`authToken`, `APIKey`).
fn words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in name.split(|c: char| !c.is_ascii_alphanumeric()).filter(|p| !p.is_empty()) {
        let b = part.as_bytes();
        let mut start = 0;
        for i in 1..b.len() {
            let lower_to_upper = !b[i - 1].is_ascii_uppercase() && b[i].is_ascii_uppercase();
            let acronym_end = b[i - 1].is_ascii_uppercase()
                && b[i].is_ascii_uppercase()
                && b.get(i + 1).is_some_and(u8::is_ascii_lowercase);
            if lower_to_upper || acronym_end {
                out.push(part[start..i].to_ascii_lowercase());
                start = i;
            }
        }
        out.push(part[start..].to_ascii_lowercase());
    }
    out
}

/// Whether the name of an assignment says its value is a secret.
fn names_a_secret(name: &str) -> bool {
    if ["pwd", "oldpwd"].iter().any(|n| n.eq_ignore_ascii_case(name)) {
        return false; // the shell's working directories
    }
    let words = words(name);
    if words.last().is_none_or(|w| DESCRIPTORS.contains(&w.as_str())) {
        return false;
    }
    words.iter().enumerate().any(|(i, w)| {
        // `tokens` are counted (`max_tokens: 8192`); secrets, keys and passwords are not.
        let singular = if w.ends_with("tokens") { w } else { w.strip_suffix('s').unwrap_or(w) };
        [w.as_str(), singular].iter().any(|w| {
            SECRET_ENDINGS.iter().any(|e| w.ends_with(e))
                || *w == "auth"
                || *w == "authorization"
                || (*w == "key" && i > 0 && !PLAIN_KEYS.contains(&words[i - 1].as_str()))
        })
    })
}

/// Whether the value of an assignment looks like a literal secret rather
/// than code (an identifier, a path, a number) or a placeholder; `after`
/// is the text after it.
fn literal_value(name: &str, sep: &str, has_scheme: bool, value: &str, after: &str) -> bool {
    if value.chars().count() < 6 || placeholder(value) || value.starts_with([':', '=']) || version(value) {
        return false;
    }
    if let Some(quote) = sep.chars().last().filter(|c| matches!(c, '"' | '\'')) {
        // A whole string without spaces (`"Authorization: Bearer x"` is a
        // header's text, not a value).
        return after.trim_start_matches('\\').starts_with(quote);
    }
    // `PGPASSWORD=postgres`: a shell or `.env` assignment is a literal.
    let env_style = sep == "=" && name.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    if has_scheme || env_style {
        return true;
    }
    // `1_000_000`: a count, a size, a port.
    if value.bytes().all(|b| b.is_ascii_digit() || b"_,.".contains(&b)) {
        return false;
    }
    // `get_token`, `Optional`, `os.environ`, `Self::MaxTokens`, `*self.token2`: code.
    let path = value.trim_start_matches(['*', '&', '!']).replace("::", ".").replace("->", ".");
    let mut segments = path.split('.');
    let first = segments.next().unwrap_or_default();
    let code = !first.is_empty()
        && first.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_')
        && segments.all(|s| {
            s.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
                && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        });
    !code
}

/// `text` with every match of `shapes` that is a secret replaced, borrowed
/// when nothing was.
fn scrub<'a>(text: &'a str, shapes: &Regex) -> Cow<'a, str> {
    let mut out: Option<String> = None;
    let (mut copied, mut at) = (0, 0);
    while let Some(caps) = shapes.captures_at(text, at) {
        let whole = caps.get(0).expect("group 0 always matches");
        match replacement(&caps, text) {
            Some(with) => {
                let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
                o.push_str(&text[copied..whole.start()]);
                o.push_str(&with);
                copied = whole.end();
                at = whole.end().max(whole.start() + 1);
            }
            // Not a secret: look again one character on, where another
            // shape may start inside this match.
            None => at = whole.start() + text[whole.start()..].chars().next().map_or(1, char::len_utf8),
        }
        if at > text.len() {
            break;
        }
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut o) => {
            o.push_str(&text[copied..]);
            Cow::Owned(o)
        }
    }
}

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

    /// `text` from a file the model may edit: without the known secrets and
    /// the high-confidence shapes (private keys, prefixed tokens, URL
    /// passwords, Slack webhooks), but with its assignments as they are.
    pub fn redact_file_text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.redact_with(text, &FILE_SHAPES)
    }

    /// `text` without the known secrets and every credential shape,
    /// assignments of secret-named values included.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.redact_with(text, &ALL_SHAPES)
    }

    fn redact_with<'a>(&self, text: &'a str, shapes: &Regex) -> Cow<'a, str> {
        match self.redact_exact(text) {
            Cow::Borrowed(b) => scrub(b, shapes),
            Cow::Owned(o) => Cow::Owned(scrub(&o, shapes).into_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_stars_anywhere_without_regard_to_case() {
        for (pattern, name, matches) in [
            ("PATH", "path", true),
            ("PATH", "PATHS", false),
            ("LC_*", "LC_ALL", true),
            ("LC_*", "LC_", true),
            ("LC_*", "XLC_ALL", false),
            ("*_DSN", "SENTRY_DSN", true),
            ("*_DSN", "DSN", false),
            ("*SECRET*", "SECRET", true),
            ("*SECRET*", "MY_SECRET_FILE", true),
            ("*SECRET*", "SECRE", false),
            ("*_TOKEN_*", "GH_TOKEN_X", true),
            ("*_TOKEN_*", "TOKENIZERS_PARALLELISM", false),
            ("A*B*C", "AxxBxxC", true),
            ("A*B*C", "AxxCxxB", false),
            ("*", "", true),
            ("", "", true),
            ("", "A", false),
        ] {
            assert_eq!(glob_match(pattern, name), matches, "{pattern} against {name}");
        }
    }

    #[test]
    fn provider_keys_are_always_credentials_and_others_can_be_allowed() {
        let allow = vec!["NPM_TOKEN".to_string(), "ANTHROPIC_API_KEY".to_string(), "MY_*".to_string()];
        for name in ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "AGENTFIX_API_KEY", "anthropic_api_key"] {
            assert!(is_credential_var(name, &allow), "{name}");
        }
        for name in [
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_PROFILE",
            "STRIPE_SECRET",
            "DB_PASSWORD",
            "SSH_AUTH_SOCK",
            "SECRET_KEY",
            "SECRET",
            "DATABASE_URL",
            "TEST_DATABASE_URL",
            "PGPASSWORD",
            "MYSQL_PWD",
            "API_KEY",
            "APIKEY",
            "TOKEN",
            "HF_TOKEN",
            "AZURE_OPENAI_KEY",
            "SENTRY_DSN",
            "DSN",
            "CLIENT_SECRET_ID",
            "DB_PASSWORD_FILE",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "SIGNING_KEY_ID",
        ] {
            assert!(is_credential_var(name, &[]), "{name}");
        }
        assert!(!is_credential_var("NPM_TOKEN", &allow));
        assert!(!is_credential_var("MY_API_KEY", &allow));
        for name in ["PATH", "HOME", "CARGO_TARGET_DIR", "TOKENIZERS_PARALLELISM", "LANG", "PWD", "OLDPWD", "KEYMAP"] {
            assert!(!is_credential_var(name, &[]), "{name}");
        }
    }

    fn env(vars: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        vars.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect()
    }

    #[test]
    fn children_keep_only_the_allow_list_and_what_env_allow_names() {
        let secrets = [
            ("SECRET_KEY", "django-insecure-x9"),
            ("DATABASE_URL", "postgres://app:hunter2@db/app"),
            ("PGPASSWORD", "hunter2"),
            ("MYSQL_PWD", "hunter2"),
            ("API_KEY", "k-123456"),
            ("TOKEN", "t-123456"),
            ("AZURE_OPENAI_KEY", "0123456789abcdef"),
            ("SENTRY_DSN", "https://abc@o1.ingest.sentry.io/1"),
            ("ANTHROPIC_API_KEY", "sk-ant-x"),
            ("OPENAI_API_KEY", "sk-x"),
            ("CARGO_REGISTRY_TOKEN", "cio-x"),
            ("BUNDLE_GEMS__EXAMPLE__COM", "user:pass"),
            ("HTTPS_PROXY", "http://user:pass@proxy:3128"),
            ("SSH_AUTH_SOCK", "/run/user/1000/ssh-agent"),
            ("XDG_RUNTIME_DIR", "/run/user/1000"),
            ("SOMETHING_ELSE", "x"),
        ];
        let kept = [
            ("PATH", "/usr/bin"),
            ("HOME", "/home/me"),
            ("USER", "me"),
            ("LANG", "C.UTF-8"),
            ("LC_ALL", "C"),
            ("TMPDIR", "/tmp/x"),
            ("CARGO_HOME", "/home/me/.cargo"),
            ("RUSTUP_TOOLCHAIN", "stable"),
            ("VIRTUAL_ENV", "/home/me/venv"),
            ("NVM_DIR", "/home/me/.nvm"),
            ("GOPATH", "/home/me/go"),
            ("JAVA_HOME", "/usr/lib/jvm"),
        ];
        let all: Vec<(&str, &str)> = secrets.iter().chain(&kept).copied().collect();
        assert_eq!(allowed_env_of(env(&all), &[]), env(&kept));
        // `envAllow` adds names and patterns, never a provider key.
        let allow = vec!["SOMETHING_ELSE".to_string(), "*_API_KEY".to_string(), "pgpassword".to_string()];
        let got = allowed_env_of(env(&all), &allow);
        let names: Vec<&str> = got.iter().map(|(k, _)| k.to_str().unwrap()).collect();
        assert!(names.contains(&"SOMETHING_ELSE") && names.contains(&"PGPASSWORD"), "{names:?}");
        assert!(!names.contains(&"ANTHROPIC_API_KEY") && !names.contains(&"OPENAI_API_KEY"), "{names:?}");
        assert!(!names.contains(&"SECRET_KEY"), "{names:?}");
        // A name that is not UTF-8 is no name on the list.
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStringExt;
            let odd = vec![(OsString::from_vec(b"PATH\xff".to_vec()), OsString::from("x"))];
            assert!(allowed_env_of(odd, &["*".to_string()]).is_empty());
        }
        // The wrapper reads this process's environment.
        let here = allowed_env(&[]);
        assert!(here.iter().all(|(k, _)| is_kept_var(k.to_str().unwrap(), &[])));
        assert_eq!(here.iter().any(|(k, _)| k == "PATH"), std::env::var_os("PATH").is_some());
    }

    #[test]
    fn no_kept_name_is_credential_shaped() {
        for name in KEPT_ENV.iter().filter(|n| !n.contains('*')) {
            assert!(!is_credential_var(name, &[]), "{name} is on both lists");
        }
    }

    const PEM_BODY: &str =
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\nVJTUt9Us8cKjMzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dV\n";

    /// Text with a credential, and how [`Redactor::redact`] and
    /// [`Redactor::redact_file_text`] show it.
    const SHAPES: &[(&str, &str, &str)] = &[
        // Assignments: scrubbed from command output, kept in files.
        ("GEMINI_API_KEY=abc123def456", "GEMINI_API_KEY=[REDACTED]", "GEMINI_API_KEY=abc123def456"),
        ("export SECRET_KEY=\"django-insecure-x9\"", "export SECRET_KEY=\"[REDACTED]\"", ""),
        ("client_secret: s3cr3tvalue", "client_secret: [REDACTED]", ""),
        ("  password: hunter22", "  password: [REDACTED]", ""),
        ("{\"password\": \"correcthorse\"}", "{\"password\": \"[REDACTED]\"}", ""),
        ("{\\\"api_key\\\": \\\"zzzzzzzzzz\\\"}", "{\\\"api_key\\\": \\\"[REDACTED]\\\"}", ""),
        ("token=abcdef123456", "token=[REDACTED]", ""),
        ("PGPASSWORD=postgres", "PGPASSWORD=[REDACTED]", ""),
        ("MYSQL_PWD=rootroot", "MYSQL_PWD=[REDACTED]", ""),
        ("SENTRY_DSN=https://abc123@o1.ingest.sentry.io/42", "SENTRY_DSN=[REDACTED]", ""),
        ("AZURE_OPENAI_KEY=0123456789abcdef", "AZURE_OPENAI_KEY=[REDACTED]", ""),
        ("authToken: 'Zm9vYmFyYmF6'", "authToken: '[REDACTED]'", ""),
        ("$password = 'pa55word';", "$password = '[REDACTED]';", ""),
        ("'passwd' => 'hunter22',", "'passwd' => '[REDACTED]',", ""),
        ("secret := \"s3cr3t-v4lue\"", "secret := \"[REDACTED]\"", ""),
        ("mysql --password=hunter22 db", "mysql --password=[REDACTED] db", ""),
        ("GET /cb?access_token=ya29abcdef&scope=x", "GET /cb?access_token=[REDACTED]&scope=x", ""),
        ("Authorization: Bearer abc.def.ghijklmnop", "Authorization: Bearer [REDACTED]", ""),
        ("proxy-authorization: Basic dXNlcjpwYXNz", "proxy-authorization: Basic [REDACTED]", ""),
        ("curl -H 'x-api-key: my-very-secret-key'", "curl -H 'x-api-key: [REDACTED]'", ""),
        ("send(bearer AbC123xyz.789)", "send(bearer [REDACTED])", ""),
        // URL passwords, any scheme: in files too.
        (
            "DATABASE_URL=postgres://app:hunter2@db:5432/app",
            "DATABASE_URL=postgres://app:[REDACTED]@db:5432/app",
            "DATABASE_URL=postgres://app:[REDACTED]@db:5432/app",
        ),
        ("redis://:s3cret@cache:6379/0", "redis://:[REDACTED]@cache:6379/0", "redis://:[REDACTED]@cache:6379/0"),
        (
            "url = \"amqp://guest:guestpw@mq/\"",
            "url = \"amqp://guest:[REDACTED]@mq/\"",
            "url = \"amqp://guest:[REDACTED]@mq/\"",
        ),
        (
            "jdbc:mysql://root:toor@localhost/db",
            "jdbc:mysql://root:[REDACTED]@localhost/db",
            "jdbc:mysql://root:[REDACTED]@localhost/db",
        ),
        (
            "https://user:p%40ss@example.com/x",
            "https://user:[REDACTED]@example.com/x",
            "https://user:[REDACTED]@example.com/x",
        ),
        // Tokens with a known prefix: in files too.
        ("key sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA", "key [REDACTED]", "key [REDACTED]"),
        ("OPENAI: sk-proj-BBBBBBBBBBBBBBBBBBBBBBBB", "OPENAI: [REDACTED]", "OPENAI: [REDACTED]"),
        (
            "aws AKIAIOSFODNN7EXAMPLE and ASIAIOSFODNN7EXAMPLE",
            "aws [REDACTED] and [REDACTED]",
            "aws [REDACTED] and [REDACTED]",
        ),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "[REDACTED]", "[REDACTED]"),
        (
            "gho_abcdefghijklmnopqrstuvwxyz0123456789 ghu_abcdefghijklmnopqrstuvwxyz0123456789",
            "[REDACTED] [REDACTED]",
            "[REDACTED] [REDACTED]",
        ),
        (
            "ghs_abcdefghijklmnopqrstuvwxyz0123456789 ghr_abcdefghijklmnopqrstuvwxyz0123456789",
            "[REDACTED] [REDACTED]",
            "[REDACTED] [REDACTED]",
        ),
        ("github_pat_11ABCDEFG0abcdefghijklmnopqrstuvwxyz", "[REDACTED]", "[REDACTED]"),
        ("glpat-abcdefghij0123456789", "[REDACTED]", "[REDACTED]"),
        ("xoxb-1234567890-abcdefghij", "[REDACTED]", "[REDACTED]"),
        (
            "xoxp-1234567890-abcdefghij xoxa-1234567890 xoxr-1234567890 xoxs-1234567890",
            "[REDACTED] [REDACTED] [REDACTED] [REDACTED]",
            "[REDACTED] [REDACTED] [REDACTED] [REDACTED]",
        ),
        ("maps(AIzaSyA1234567890abcdefghijklmnopqrstuv)", "maps([REDACTED])", "maps([REDACTED])"),
        ("hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "[REDACTED]", "[REDACTED]"),
        ("npm_abcdefghijklmnopqrstuvwxyz0123456789", "[REDACTED]", "[REDACTED]"),
        ("pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoLWlqa2w", "[REDACTED]", "[REDACTED]"),
        ("SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG", "[REDACTED]", "[REDACTED]"),
        (
            "stripe sk_live_abcdefghij0123 rk_live_abcdefghij0123 sk_test_abcdefghij0123",
            "stripe [REDACTED] [REDACTED] [REDACTED]",
            "stripe [REDACTED] [REDACTED] [REDACTED]",
        ),
        (
            "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXX",
            "https://hooks.slack.com/services/[REDACTED]",
            "https://hooks.slack.com/services/[REDACTED]",
        ),
        (
            "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U!",
            "jwt [REDACTED]!",
            "jwt [REDACTED]!",
        ),
    ];

    #[test]
    fn every_shape_is_scrubbed_and_files_keep_their_assignments() {
        let r = Redactor::default();
        for (text, redacted, in_file) in SHAPES {
            assert_eq!(r.redact(text), *redacted, "redact({text:?})");
            let in_file = if in_file.is_empty() { text } else { in_file };
            assert_eq!(r.redact_file_text(text), *in_file, "redact_file_text({text:?})");
        }
    }

    #[test]
    fn private_key_blocks_are_scrubbed_whole_or_cut_off() {
        let r = Redactor::default();
        for kind in ["", "RSA ", "EC ", "DSA ", "OPENSSH ", "ENCRYPTED "] {
            let text = format!(
                "before\n-----BEGIN {kind}PRIVATE KEY-----\n{PEM_BODY}-----END {kind}PRIVATE KEY-----\nafter\n"
            );
            for out in [r.redact(&text), r.redact_file_text(&text)] {
                assert_eq!(out, "before\n[REDACTED]\nafter\n", "{kind}");
            }
        }
        let pgp = "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\nlQOYBF0abcdefghijklmnop\n=AbCd\n-----END PGP PRIVATE KEY BLOCK-----";
        assert_eq!(r.redact_file_text(pgp), REDACTED);
        let legacy = "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,3F17F5316E2BAC89\n\nMIIEow\n-----END RSA PRIVATE KEY-----";
        assert_eq!(r.redact_file_text(legacy), REDACTED);
        // Inside a string literal, with `\n` escapes.
        let literal = format!(
            "KEY = \"-----BEGIN PRIVATE KEY-----\\n{}\\n-----END PRIVATE KEY-----\\n\"",
            "MIIEvQIBADANBgkqhkiG9w0B"
        );
        assert_eq!(r.redact_file_text(&literal), "KEY = \"[REDACTED]\\n\"");
        // Cut off by a size limit: removed to the end, however short.
        assert_eq!(r.redact("x\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow"), "x\n[REDACTED]");
        assert_eq!(r.redact("x\n-----BEGIN OPENSSH PRIVATE KEY-----"), "x\n[REDACTED]");
        // Cut off inside a longer text: its base64 is removed.
        let cut = format!("-----BEGIN PRIVATE KEY-----\n{PEM_BODY}[… 3 KB cut …]\nnext");
        assert_eq!(r.redact(&cut), "[REDACTED][… 3 KB cut …]\nnext");
        // A program that looks for keys is no key.
        let code = "if line == \"-----BEGIN RSA PRIVATE KEY-----\" {\n    found = true;\n}\n";
        assert!(matches!(r.redact(code), Cow::Borrowed(_)));
        // Public keys and certificates are public.
        let public = "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8A\n-----END PUBLIC KEY-----";
        assert!(matches!(r.redact(public), Cow::Borrowed(_)));
    }

    #[test]
    fn code_and_prose_are_untouched_and_not_copied() {
        let r = Redactor::new(["my-very-secret-key".to_string()]);
        for text in [
            "def tokenize(secret_sauce): pass",
            "password_reset_url = reverse(\"reset\")",
            "token = get_token()",
            "token = get_token",
            "api_key = os.environ[\"API_KEY\"]",
            "key = settings.SECRET_KEY",
            "def login(password: str, token: Optional[str] = None):",
            "let token: String = read_token(&path)?;",
            "secret: Option<Secret>,",
            "{\"key\": \"settings.title\", \"value\": \"Settings\"}",
            "sort_key = \"created_at\"",
            "public_key: ssh-ed25519AAAA",
            "tokenizer = \"bert-base-uncased\"",
            "author: \"JaneDoe42\"",
            "keyboard = \"us-intl-alt\"",
            "TOKEN_URL=https://auth.example.com/oauth/token",
            "PASSWORD_FILE=/run/secrets/db_password",
            "token_type: bearer",
            "PWD=/home/me/project",
            "\"password\": \"${DB_PASSWORD}\"",
            "password = \"%(password)s\"",
            "password: ********",
            "postgres://app:${PGPASS}@db/app",
            "https://example.com:8080/path?q=1",
            "ssh://git@github.com/org/repo.git",
            "git@github.com:org/repo.git",
            "bearer authentication is described in RFC 6750",
            "sk-learn and task-abcdefghijklmnopqrstuvwxyz",
            "let t = tokens[0]; // 漢字 emoji 😀 and a password: short",
            "redactor: crate::secrets::Redactor,",
            "\"max_tokens\" => Self::MaxTokens,",
            "max_output_tokens: *max_output_tokens,",
            "tokens_before: 30_000, \"maxTokens\":2000000, input_tokens: 123456",
            "token_budget: 50000, token_count: 12",
            "if token == \"abcdef123\"",
            "{\"auth\": \"Authorization header\"}",
            "export ANTHROPIC_API_KEY=sk-ant-...",
            "\"@azure/core-auth\": \"^1.10.0\", \"jsonwebtoken\": \"~9.0.0\", \"oauth\": \"2.1.0-rc1\"",
            "",
        ] {
            assert!(matches!(r.redact(text), Cow::Borrowed(_)), "redact changed {text:?}: {}", r.redact(text));
            assert!(matches!(r.redact_file_text(text), Cow::Borrowed(_)), "{text:?}");
        }
    }

    #[test]
    fn the_exact_key_goes_first_and_everything_else_after_it() {
        let r = Redactor::new(["my-very-secret-key".to_string(), "ab".to_string()]);
        let text = "error: invalid key my-very-secret-key (header x-api-key: my-very-secret-key) ab";
        let out = r.redact(text);
        assert_eq!(out, "error: invalid key [REDACTED] (header x-api-key: [REDACTED]) ab");
        assert_eq!(r.redact_exact("token=my-very-secret-key"), "token=[REDACTED]");
        assert_eq!(
            r.redact_file_text("token=my-very-secret-key and token=other-value"),
            "token=[REDACTED] and token=other-value"
        );
        // Several shapes in one text, a rejected one before a real one.
        let mixed = "token = get_token(ghp_abcdefghijklmnopqrstuvwxyz0123456789) password=hunter22 \
                     postgres://u:pw12345@h";
        assert_eq!(r.redact(mixed), "token = get_token([REDACTED]) password=[REDACTED] postgres://u:[REDACTED]@h");
        assert_eq!(r.redact(mixed).matches(REDACTED).count(), 3);
        // Redacting twice changes nothing more.
        let once = r.redact(mixed).into_owned();
        assert!(matches!(r.redact(&once), Cow::Borrowed(_)), "{once}");
    }
}
