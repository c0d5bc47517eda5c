package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fleetquota/throttle/quota"
)

// renderJSON writes v as one line of JSON, empty lists as [] rather than
// null.
func renderJSON(w io.Writer, v *view) error {
	if v.Providers == nil {
		v.Providers = []providerView{}
	}
	for i := range v.Providers {
		if v.Providers[i].Rows == nil {
			v.Providers[i].Rows = []row{}
		}
	}
	if v.Pauses == nil {
		v.Pauses = []pauseView{}
	}
	if v.Refusals == nil {
		v.Refusals = []refusalView{}
	}
	return json.NewEncoder(w).Encode(v)
}

// tableHeadings are the columns of the table; notes, the last, wraps.
var tableHeadings = []string{"PROVIDER", "LIMIT", "SCOPE", "PUBLISHED", "EFFECTIVE", "LEFT", "REFILL", "NOTES"}

// columns says how a table's columns narrow to fit the width. Every
// column first narrows by wrapping its cells at spaces, but those in
// whole; then those in cut, down to the width given, by cutting words
// (with "…").
type columns struct {
	cut   map[int]int
	whole map[int]bool
	// trailer moves the last column, when the table does not fit as it
	// is, to lines of its own under each row, indented past the first
	// column, before the other columns narrow.
	trailer bool
}

// tableColumns: scope values can be long (--json has them whole) and
// notes are many words; "97 of 100" and "in 4m05s" read best on one line.
// Notes, on few rows, go under their row before the others narrow.
var tableColumns = columns{cut: map[int]int{2: 12, 7: 16}, whole: map[int]bool{5: true, 6: true}, trailer: true}

// comfortable is the width a column keeps while others can still narrow.
const comfortable = 20

// pauseColumns: a tenant's scope value and the reason may be cut.
var pauseColumns = columns{cut: map[int]int{0: 12, 3: 16}}

// renderTable writes v as a table in width columns: the limits with state
// (every limit with all), the pauses in force, and what was left out.
func renderTable(w io.Writer, v *view, all bool, width int) error {
	var b strings.Builder
	if v.Error != "" {
		fmt.Fprintf(&b, "throttle status: error: %s\n", v.Error)
		_, err := io.WriteString(w, b.String())
		return err
	}
	scan := "scan complete"
	if !v.ScanComplete {
		scan = "scan in progress: more scope values may exist"
	}
	wrapTo(&b, fmt.Sprintf("redis time %s, prefix %q, %s", v.Now.Format(time.RFC3339Nano), v.Prefix, scan), width, "")
	for _, l := range tenantLines(v) {
		wrapTo(&b, l, width, "  ")
	}
	cells, idle := tableCells(v, all)
	if len(cells) > 1 {
		b.WriteByte('\n')
		layout(&b, cells, width, tableColumns)
	}
	if pauses := pauseRows(v); len(pauses) > 1 {
		b.WriteByte('\n')
		layout(&b, pauses, width, pauseColumns)
	}
	if refused := refusalRows(v); len(refused) > 1 {
		b.WriteByte('\n')
		layout(&b, refused, width, columns{})
	}
	var notes []string
	switch {
	case len(cells) == 1:
		notes = append(notes, fmt.Sprintf("No limit has state in Redis: all %d are full (--all lists them).", idle))
	case idle > 0:
		notes = append(notes, fmt.Sprintf("%d limits without state in Redis, all full, are not shown (--all lists them).", idle))
	}
	if n := refusalNote(v); n != "" {
		notes = append(notes, n)
	}
	for _, p := range v.Providers {
		if p.ScopesShown < p.ScopesKnown {
			notes = append(notes, fmt.Sprintf("%s: %d of %d scope values shown, busiest first (--top 0 shows all).", p.Name, p.ScopesShown, p.ScopesKnown))
		}
	}
	if len(notes) > 0 {
		b.WriteByte('\n')
	}
	for _, n := range notes {
		wrapTo(&b, n, width, "")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// tableCells lists the table's rows, headings first, and counts the
// limits left out for having no state.
func tableCells(v *view, all bool) (cells [][]string, idle int) {
	cells = [][]string{tableHeadings}
	for _, p := range v.Providers {
		for _, r := range p.Rows {
			if !r.Exists && !all {
				idle++
				continue
			}
			cells = append(cells, []string{
				p.Name, r.Limit, scopeCell(r), r.Published, r.Effective,
				count(r.Remaining) + " of " + count(r.Capacity), refill(r), rowNotes(r),
			})
		}
	}
	return cells, idle
}

// scopeCell says whose state a row is: "provider", a scope and its value,
// or the scope and "(none)" for the state requests without a value share.
func scopeCell(r row) string {
	switch {
	case r.Scope == "provider":
		return r.Scope
	case r.Value == "": // a scoped limit's row without a value
		return r.Scope + " (none)"
	}
	return r.Scope + " " + r.Value
}

// refill says when a row's limit is full again: "full" when it is.
func refill(r row) string {
	if r.Remaining >= r.Capacity && r.Ahead == 0 && r.Debt == 0 {
		return "full"
	}
	return "in " + humanDuration(time.Duration(r.ResetAfterMS)*time.Millisecond)
}

// rowNotes lists what a row's columns do not show: leases held, counts
// charged ahead (to later windows or buckets, by reservations waiting for
// them), debt, a pause.
func rowNotes(r row) string {
	var n []string
	if r.Plan != "" {
		n = append(n, "plan "+r.Plan)
	}
	n = append(n, fairNotes(r)...)
	n = append(n, classNotes(r)...)
	if r.Kind == quota.Concurrency.String() && r.Used > 0 {
		n = append(n, fmt.Sprintf("%d lease%s held, soonest expires in %s",
			r.Used, plural(int(r.Used)), humanDuration(time.Duration(r.NextExpiryMS)*time.Millisecond)))
	}
	if r.Ahead > 0 {
		n = append(n, fmt.Sprintf("%s waiting ahead", count(r.Ahead)))
	}
	if r.Debt > 0 {
		n = append(n, fmt.Sprintf("%s debt", count(r.Debt)))
	}
	if r.PausedUntil != nil {
		n = append(n, "paused")
	}
	return strings.Join(n, ", ")
}

// pauseRows lists the pauses in force (view.Pauses), headings first: per
// provider its pause of every tenant, its own pause, then its tenants'.
// For a provider tagged per tenant the provider's own pause (a vendor's
// throttle of a request without a tenant value) holds only the requests
// without a tenant; "throttle pause PROVIDER" holds them all; each tenant
// also reads its own. REASON is what the pause recorded of itself.
func pauseRows(v *view) [][]string {
	rows := [][]string{{"PAUSED", "HOLDS", "UNTIL", "REASON"}}
	for _, p := range v.Pauses {
		who := p.Provider
		if p.Tenant != "" {
			who += "/" + p.Tenant
		}
		until := fmt.Sprintf("%s (in %s)", p.Until.Format(time.RFC3339), humanDuration(p.Until.Sub(v.Now)))
		rows = append(rows, []string{who, p.Holds, until, p.Reason})
	}
	return rows
}

// layout writes rows, headings first, as columns two spaces apart that
// fit in width, narrowed as cols says; when even that does not fit, each
// row becomes a block of lines. A column empty but for its heading is
// left out (the last only, so that cols keeps its numbers).
func layout(b *strings.Builder, rows [][]string, width int, cols columns) {
	rows = dropEmptyLast(rows)
	if n := len(rows[0]); cols.trailer && n > 1 {
		front := make([][]string, len(rows))
		for i, r := range rows {
			front[i] = r[:n-1]
		}
		if _, need := natural(rows); need > width {
			if widths, ok := fit(front, width, cols); ok {
				indent := strings.Repeat(" ", widths[0]+2)
				for i, r := range front {
					writeRow(b, r, widths)
					if i > 0 && rows[i][n-1] != "" {
						wrapTo(b, rows[i][n-1], width, indent)
					}
				}
				return
			}
		}
	}
	widths, ok := fit(rows, width, cols)
	if !ok {
		blocks(b, rows, width)
		return
	}
	for _, r := range rows {
		writeRow(b, r, widths)
	}
}

// writeRow writes one row in columns of widths, two spaces apart, its
// cells wrapped to them.
func writeRow(b *strings.Builder, r []string, widths []int) {
	cells := make([][]string, len(r))
	height := 1
	for i, c := range r {
		cells[i] = wrap(c, widths[i])
		height = max(height, len(cells[i]))
	}
	for l := 0; l < height; l++ {
		var line strings.Builder
		for i := range r {
			c := ""
			if l < len(cells[i]) {
				c = cells[i][l]
			}
			line.WriteString(c)
			if i < len(r)-1 {
				line.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+2))
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
}

// natural returns the widths of rows' columns, each as wide as its widest
// cell, and the width they need with two spaces between columns.
func natural(rows [][]string) (widths []int, need int) {
	widths = make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	need = 2 * (len(widths) - 1)
	for _, w := range widths {
		need += w
	}
	return widths, need
}

// fit returns the columns' widths: as wide as their widest cell, or
// narrowed to fit in width as cols says; false when that does not fit.
func fit(rows [][]string, width int, cols columns) ([]int, bool) {
	widths, need := natural(rows)
	words := make([]int, len(widths))
	for _, r := range rows {
		for i, c := range r {
			for _, w := range strings.Fields(c) {
				words[i] = max(words[i], utf8.RuneCountInString(w))
			}
		}
	}
	// Narrow the column with the most to give first, one rune at a time,
	// so that the columns share the narrowing.
	narrow := func(floor func(col int) int) {
		for need > width {
			best, slack := -1, 0
			for col := range widths {
				if d := widths[col] - floor(col); d > slack {
					best, slack = col, d
				}
			}
			if best < 0 {
				return
			}
			widths[best]--
			need--
		}
	}
	wrapTo := func(least int) func(col int) int {
		return func(col int) int {
			if cols.whole[col] {
				return widths[col]
			}
			return max(words[col], min(widths[col], least))
		}
	}
	cutTo := func(least int) func(col int) int {
		return func(col int) int {
			if floor, ok := cols.cut[col]; ok {
				return min(max(floor, least), widths[col])
			}
			return widths[col]
		}
	}
	// Wrap every column to a comfortable width, then cut the cuttable
	// ones to it and further, and only then wrap further.
	for _, floor := range []func(int) int{wrapTo(comfortable), cutTo(comfortable), cutTo(0), wrapTo(comfortable / 2), wrapTo(0)} {
		narrow(floor)
	}
	return widths, need <= width
}

// blocks writes each row but the headings as a block of lines for a
// terminal too narrow for columns: the first cells on a line, then
// "heading value" pairs.
func blocks(b *strings.Builder, rows [][]string, width int) {
	heads := rows[0]
	for _, r := range rows[1:] {
		wrapTo(b, strings.Join(r[:min(3, len(r))], "  "), width, "")
		var pairs []string
		for i := 3; i < len(r); i++ {
			if r[i] != "" {
				pairs = append(pairs, strings.ToLower(heads[i])+" "+r[i])
			}
		}
		if len(pairs) > 0 {
			wrapTo(b, strings.Join(pairs, "; "), width, "  ")
		}
	}
}

// dropEmptyLast leaves out the last column when it is empty in every row
// but the headings.
func dropEmptyLast(rows [][]string) [][]string {
	last := len(rows[0]) - 1
	for _, r := range rows[1:] {
		if r[last] != "" {
			return rows
		}
	}
	out := make([][]string, len(rows))
	for i, r := range rows {
		out[i] = r[:last]
	}
	return out
}

// cut shortens s to n runes, the last "…" when something was cut.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:max(n-1, 0)]) + "…"
}

// wrap splits s into lines of at most n runes at spaces; a word longer
// than a line is cut. It returns at least one line.
func wrap(s string, n int) []string {
	n = max(n, 1)
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		switch {
		case line == "":
			line = w
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(w) <= n:
			line += " " + w
		default:
			lines = append(lines, cut(line, n))
			line = w
		}
	}
	return append(lines, cut(line, n))
}

// wrapTo writes s wrapped to width, each line after indent.
func wrapTo(b *strings.Builder, s string, width int, indent string) {
	for _, l := range wrap(s, width-len(indent)) {
		b.WriteString(indent + l + "\n")
	}
}
