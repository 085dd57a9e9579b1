//! Markup building where every piece of text is escaped: literal markup
//! is `&'static str` (so no string from the cloud can be passed as markup
//! by mistake), everything else goes through [`Html::text`] or
//! [`Html::attr`]. Names come from the cloud's APIs: a project called
//! `<script>…` must render as text.

use std::fmt::{self, Display, Write as _};

/// An HTML (or inline SVG) fragment under construction.
#[derive(Debug, Default)]
pub(crate) struct Html {
    out: String,
}

impl Html {
    pub(crate) fn new() -> Self {
        Html::default()
    }

    /// Literal markup, written as is.
    pub(crate) fn raw(&mut self, markup: &'static str) -> &mut Self {
        self.out.push_str(markup);
        self
    }

    /// `value` as text: `&`, `<`, `>`, `"` and `'` escaped, so it is safe
    /// both between tags and inside a quoted attribute.
    pub(crate) fn text(&mut self, value: impl Display) -> &mut Self {
        // Format straight into the escaper: no intermediate String.
        let _ = write!(Escaper(&mut self.out), "{value}");
        self
    }

    /// ` name="value"`, the value escaped.
    pub(crate) fn attr(&mut self, name: &'static str, value: impl Display) -> &mut Self {
        self.raw(" ").raw(name).raw("=\"").text(value).raw("\"")
    }

    /// `<tag>value</tag>`, the value escaped.
    pub(crate) fn element(&mut self, tag: Tag, value: impl Display) -> &mut Self {
        self.raw(tag.open).text(value).raw(tag.close)
    }

    /// `<a href="href">value</a>`, both escaped.
    pub(crate) fn link(&mut self, href: impl Display, value: impl Display) -> &mut Self {
        self.raw("<a")
            .attr("href", href)
            .raw(">")
            .text(value)
            .raw("</a>")
    }

    /// Appends another fragment.
    pub(crate) fn append(&mut self, other: Html) -> &mut Self {
        self.out.push_str(&other.into_string());
        self
    }

    pub(crate) fn into_string(self) -> String {
        self.out
    }
}

/// A pair of literal tags for [`Html::element`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tag {
    open: &'static str,
    close: &'static str,
}

pub(crate) const TD: Tag = Tag {
    open: "<td>",
    close: "</td>",
};
pub(crate) const TH: Tag = Tag {
    open: "<th>",
    close: "</th>",
};
pub(crate) const CODE_TD: Tag = Tag {
    open: "<td><code>",
    close: "</code></td>",
};
pub(crate) const P: Tag = Tag {
    open: "<p>",
    close: "</p>",
};
pub(crate) const CODE: Tag = Tag {
    open: "<code>",
    close: "</code>",
};

/// A `fmt::Write` that escapes what is written through it.
struct Escaper<'a>(&'a mut String);

impl fmt::Write for Escaper<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for c in s.chars() {
            match c {
                '&' => self.0.push_str("&amp;"),
                '<' => self.0.push_str("&lt;"),
                '>' => self.0.push_str("&gt;"),
                '"' => self.0.push_str("&quot;"),
                '\'' => self.0.push_str("&#39;"),
                c => self.0.push(c),
            }
        }
        Ok(())
    }
}

/// `text` cut to `max` characters, an ellipsis marking the cut (labels
/// inside fixed-size SVG boxes; the full text goes in a `<title>`).
pub(crate) fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_attributes_are_escaped() {
        let mut h = Html::new();
        h.raw("<p").attr("title", "a\"b'c").raw(">");
        h.text("<script>alert(1)</script> & more").raw("</p>");
        assert_eq!(
            h.into_string(),
            "<p title=\"a&quot;b&#39;c\">&lt;script&gt;alert(1)&lt;/script&gt; &amp; more</p>"
        );
    }

    #[test]
    fn display_values_are_escaped_too() {
        struct Sneaky;
        impl Display for Sneaky {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("<b>")
            }
        }
        let mut h = Html::new();
        h.element(TD, Sneaky).link("/x?a=1&b=2", 7);
        assert_eq!(
            h.into_string(),
            "<td>&lt;b&gt;</td><a href=\"/x?a=1&amp;b=2\">7</a>"
        );
    }

    #[test]
    fn clip_marks_the_cut() {
        assert_eq!(clip("short", 10), "short");
        assert_eq!(clip("abcdefghij", 5), "abcd…");
        assert_eq!(clip("ééééé", 5), "ééééé");
    }
}
