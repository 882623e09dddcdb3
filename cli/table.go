package cli

import (
	"io"
	"strings"
	"unicode/utf8"
)

// table lays out columns by the width of their plain text, so that colour
// escapes (which text/tabwriter would count as width) do not break the
// alignment.
type table struct {
	indent string
	rows   [][]cell
}

type cell struct{ plain, shown string }

func plain(s string) cell { return cell{plain: s, shown: s} }

// painted is a cell whose shown text carries colour codes around plain.
func painted(s, shown string) cell { return cell{plain: s, shown: shown} }

func (t *table) add(cells ...cell) { t.rows = append(t.rows, cells) }

// addPlain adds a row of plain strings.
func (t *table) addPlain(cols ...string) {
	cells := make([]cell, len(cols))
	for i, c := range cols {
		cells[i] = plain(c)
	}
	t.add(cells...)
}

func (t *table) write(w io.Writer) error {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			if n := utf8.RuneCountInString(c.plain); n > widths[i] {
				widths[i] = n
			}
		}
	}
	var b strings.Builder
	for _, r := range t.rows {
		// Trailing empty cells add no padding.
		last := len(r) - 1
		for last >= 0 && r[last].plain == "" {
			last--
		}
		b.WriteString(t.indent)
		for i := 0; i <= last; i++ {
			b.WriteString(r[i].shown)
			if i < last {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(r[i].plain)+2))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}
