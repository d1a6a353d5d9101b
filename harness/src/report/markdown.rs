//! Markdown tables, the one builder every report's summary uses.
//!
//! A row is `| a | b |`; an empty header cell is written `| |` (the key/value tables' blank
//! corner). The text of each cell is the caller's: [`escape`] keeps a `|` from ending it.

/// How a column's rule aligns it: `---` or `---:`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

impl Align {
    fn rule(self) -> &'static str {
        match self {
            Align::Left => "---",
            Align::Right => "---:",
        }
    }
}

/// A table: a header, its rule and the rows, rendered line by line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    header: Vec<String>,
    align: Vec<Align>,
    rows: Vec<String>,
}

impl Table {
    /// A table with these column titles, every column left-aligned.
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        let header: Vec<String> = header.into_iter().map(Into::into).collect();
        Table {
            align: vec![Align::Left; header.len()],
            header,
            rows: Vec::new(),
        }
    }

    /// A table whose columns are (title, alignment).
    pub fn aligned<S: Into<String>>(columns: impl IntoIterator<Item = (S, Align)>) -> Table {
        let (header, align) = columns.into_iter().map(|(h, a)| (h.into(), a)).unzip();
        Table {
            header,
            align,
            rows: Vec::new(),
        }
    }

    /// Adds a left-aligned column (a conditional one, after the fixed ones).
    pub fn column(&mut self, title: impl Into<String>) -> &mut Table {
        self.header.push(title.into());
        self.align.push(Align::Left);
        self
    }

    /// Adds a row of cells, in column order.
    pub fn row<S: AsRef<str>>(&mut self, cells: impl IntoIterator<Item = S>) -> &mut Table {
        self.rows.push(row(cells));
        self
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The header line and the rule line, each ending in a newline.
    pub fn head(&self) -> String {
        let mut out = String::from("|");
        for h in &self.header {
            if h.is_empty() {
                out.push_str(" |");
            } else {
                out.push(' ');
                out.push_str(h);
                out.push_str(" |");
            }
        }
        out.push_str("\n|");
        for a in &self.align {
            out.push_str(a.rule());
            out.push('|');
        }
        out.push('\n');
        out
    }

    /// The whole table: header, rule and rows, each line ending in a newline.
    pub fn render(&self) -> String {
        let mut out = self.head();
        for r in &self.rows {
            out.push_str(r);
            out.push('\n');
        }
        out
    }
}

/// One row, `| a | b |`, without its newline.
pub fn row<S: AsRef<str>>(cells: impl IntoIterator<Item = S>) -> String {
    let mut out = String::from("|");
    for c in cells {
        out.push(' ');
        out.push_str(c.as_ref());
        out.push_str(" |");
    }
    out
}

/// A cell's text with its `|` escaped, so that it stays one cell.
pub fn escape(s: &str) -> String {
    s.replace('|', "\\|")
}

/// As [`escape`], with line breaks turned into spaces so that the row stays one line.
pub fn escape_line(s: &str) -> String {
    escape(s).replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_renders_header_rule_and_rows() {
        let mut t = Table::aligned([("suite", Align::Left), ("ran", Align::Right)]);
        t.row(["smoke", "4"]).row(["edges", "2"]);
        assert_eq!(
            t.render(),
            "| suite | ran |\n|---|---:|\n| smoke | 4 |\n| edges | 2 |\n"
        );
    }

    #[test]
    fn a_blank_corner_is_one_space_and_empty_cells_keep_two() {
        let mut t = Table::new(["", ""]);
        t.row(["target", ""]);
        assert_eq!(t.render(), "| | |\n|---|---|\n| target |  |\n");
    }

    #[test]
    fn cells_escape_bars_and_breaks() {
        assert_eq!(escape("a|b"), "a\\|b");
        assert_eq!(escape_line("a|b\nc"), "a\\|b c");
    }
}
