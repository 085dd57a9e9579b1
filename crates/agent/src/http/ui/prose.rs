//! The pages' prose as a reader sees it, for tests that hold it to what
//! no browser repairs: two sentences built in separate pieces and joined
//! without a space ("holding the address.No row").

/// Tags that flow within a line: the text on either side of them runs on.
/// Every other tag (paragraphs, list items, cells, `<br>`, …) breaks it.
const INLINE: &[&str] = &[
    "a", "abbr", "b", "code", "em", "label", "small", "span", "strong",
];

/// The text of `html` as shown: inline tags dropped, every other tag a
/// line break, `<style>` left out, the escapes `Html::text` writes decoded.
pub(crate) fn visible_text(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        let Some(len) = rest[open..].find('>') else {
            break;
        };
        let tag = &rest[open + 1..open + len];
        rest = &rest[open + len + 1..];
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect();
        if name == "style" && !tag.starts_with('/') {
            rest = rest.find("</style>").map_or("", |end| &rest[end..]);
            continue;
        }
        if !INLINE.contains(&name.as_str()) {
            out.push('\n');
        }
    }
    out.push_str(rest);
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// Each place in `text` where a period is directly followed by a capital
/// letter, with a little of what surrounds it.
pub(crate) fn joined_sentences(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w[0] == '.' && w[1].is_ascii_uppercase())
        .map(|(i, _)| {
            let from = i.saturating_sub(30);
            let to = (i + 30).min(chars.len());
            chars[from..to].iter().collect()
        })
        .collect()
}

/// Panics, naming `what`, if `text` joins two sentences without a space.
pub(crate) fn assert_sentences_apart(what: &str, text: &str) {
    let joined = joined_sentences(text);
    assert!(
        joined.is_empty(),
        "{what}: sentences joined without a space: {joined:?}"
    );
}

#[test]
fn inline_tags_run_on_and_others_break_the_line() {
    let html = "<style>p.X{}</style><p>the <code>address</code>.</p><p>No row</p>\
                <li>holding the address.<strong>No</strong> row &amp; more</li>";
    let text = visible_text(html);
    assert_eq!(
        text,
        "\n\nthe address.\n\nNo row\n\nholding the address.No row & more\n"
    );
    let joined = joined_sentences(&text);
    assert_eq!(joined.len(), 1, "{joined:?}");
    assert!(joined[0].ends_with("holding the address.No row & more\n"));
    assert!(joined_sentences("10.0.5.1/32 ends. Then one; v0.1.0, e.g. this").is_empty());
}
