//! Column alignment as Go's `text/tabwriter` does it with kubectl's settings (minimum width 6,
//! padding 3, spaces): a tab ends a cell; consecutive lines that have a cell in a column form a
//! block whose cells are padded to the block's widest cell plus the padding. The text after a
//! line's last tab is not a cell and is never padded. Widths are remembered (kubectl's
//! `RememberWidths`): a column is never narrower than it was in an earlier block.

const MIN_WIDTH: usize = 6;
const PADDING: usize = 3;

/// `text` with its tab-terminated cells aligned.
pub fn format(text: &str) -> String {
    let lines: Vec<Vec<&str>> = text.split('\n').map(|l| l.split('\t').collect()).collect();
    let mut out = String::new();
    let mut widths = Vec::new();
    let mut max_widths = Vec::new();
    format_block(
        &lines,
        0,
        lines.len(),
        &mut widths,
        &mut max_widths,
        &mut out,
    );
    // `split` yields a last, empty line after the final newline; do not add a newline for it.
    out
}

fn width(s: &str) -> usize {
    s.chars().count()
}

fn format_block(
    lines: &[Vec<&str>],
    mut line0: usize,
    line1: usize,
    widths: &mut Vec<usize>,
    max_widths: &mut Vec<usize>,
    out: &mut String,
) {
    let column = widths.len();
    let mut this = line0;
    while this < line1 {
        if column + 1 >= lines[this].len() {
            this += 1;
            continue;
        }
        write_lines(lines, line0, this, widths, out);
        line0 = this;
        let mut w = MIN_WIDTH;
        while this < line1 && column + 1 < lines[this].len() {
            w = w.max(width(lines[this][column]) + PADDING);
            this += 1;
        }
        if max_widths.len() < widths.len() {
            max_widths.extend_from_slice(&widths[max_widths.len()..]);
        }
        if max_widths.len() == widths.len() {
            max_widths.push(w);
        } else {
            w = w.max(max_widths[column]);
            max_widths[column] = w;
        }
        widths.push(w);
        format_block(lines, line0, this, widths, max_widths, out);
        widths.pop();
        line0 = this;
    }
    write_lines(lines, line0, line1, widths, out);
}

fn write_lines(lines: &[Vec<&str>], from: usize, to: usize, widths: &[usize], out: &mut String) {
    for (i, line) in lines.iter().enumerate().take(to).skip(from) {
        for (j, cell) in line.iter().enumerate() {
            out.push_str(cell);
            if j < widths.len() && j + 1 < line.len() {
                out.push_str(&" ".repeat(widths[j].saturating_sub(width(cell))));
            }
        }
        if i + 1 < lines.len() {
            out.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn aligns_blocks_like_go() {
        assert_eq!(
            super::format("a\tb\nlonger\tc\nplain\nx:\terr\t\n"),
            "a        b\nlonger   c\nplain\nx:       err   \n"
        );
    }
}
