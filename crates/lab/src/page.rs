//! Reading the agent's debug pages in tests: the rows and numbers the
//! pages mark with `data-*` attributes, from the server's markup or a
//! browser's DOM dump alike (both keep attribute order and double
//! quotes).

/// The `<tr attr="value" …>…` of `page`, up to its `</tr>`.
///
/// # Panics
/// No such row.
#[must_use]
pub fn row<'a>(page: &'a str, attr: &str, value: &str) -> &'a str {
    let start = page
        .find(&format!("<tr {attr}=\"{value}\""))
        .unwrap_or_else(|| panic!("no row {attr}={value} in\n{page}"));
    &page[start..start + page[start..].find("</tr>").unwrap_or(page.len() - start)]
}

/// The integer in the first `attr="…"` of `html`.
///
/// # Panics
/// No such attribute, or not an integer.
#[must_use]
pub fn number(html: &str, attr: &str) -> u64 {
    let marker = format!("{attr}=\"");
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no {attr} in {html}"))
        + marker.len();
    let end = html[start..]
        .find('"')
        .unwrap_or_else(|| panic!("unterminated {attr} in {html}"));
    html[start..start + end]
        .parse()
        .unwrap_or_else(|e| panic!("{attr} in {html}: {e}"))
}

/// Every `attr="…"` integer of `html`, in document order.
#[must_use]
pub fn numbers(html: &str, attr: &str) -> Vec<u64> {
    let marker = format!("{attr}=\"");
    html.match_indices(&marker)
        .map(|(i, _)| number(&html[i..], attr))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_and_numbers_by_attribute() {
        let page = "<table><tr data-tap=\"t1\" data-port=\"p\"><td data-n=\"7\">7</td><td data-n=\"9\"></td></tr><tr data-tap=\"t2\"></tr></table>";
        let r = row(page, "data-tap", "t1");
        assert!(r.ends_with("<td data-n=\"9\"></td>"), "{r}");
        assert_eq!(number(r, "data-n"), 7);
        assert_eq!(numbers(page, "data-n"), [7, 9]);
        assert_eq!(row(page, "data-tap", "t2"), "<tr data-tap=\"t2\">");
    }
}
