package fleet

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// The plots are hand-built SVG: no plotting dependency.

var algoColor = map[string]string{
	AlgoThrottle:      "#1b7837",
	AlgoFixedWindow:   "#d6604d",
	AlgoRedisRate:     "#4393c3",
	AlgoLockGCRA:      "#8073ac",
	AlgoLocalRate:     "#e08214",
	AlgoThrottleLocal: "#66bd63",
}

func color(algo string) string {
	if c, ok := algoColor[algo]; ok {
		return c
	}
	return "#333"
}

// bin is the width of one point of the rate plots.
const bin = 100 * time.Millisecond

// limitLine is the fleet-wide rate of the scenario's first limit, per bin:
// what the plots draw the admitted rate against.
func limitLine(sc *Scenario) (float64, string) {
	l := sc.Vendor[0]
	var perSec float64
	switch l.Kind {
	case KindGCRA:
		perSec = float64(l.Rate) / l.Period.Seconds()
	case KindLeaky:
		perSec = float64(l.Rate)
	case KindHour: // the quota's mean rate over its compressed hour
		perSec = float64(l.Rate) / l.Period.Seconds()
	default:
		return 0, ""
	}
	label := fmt.Sprintf("%s: %.0f/s", l.Name, perSec)
	if l.PerBusiness {
		perSec *= float64(sc.Businesses)
		label = fmt.Sprintf("%s × %d businesses: %.0f/s", l.Name, sc.Businesses, perSec)
	}
	return perSec * bin.Seconds(), label
}

// RateSVG plots, for every algorithm of one scenario, the requests the
// vendor served and throttled per 100 ms against the limit line.
func RateSVG(runs []*RunResult) string {
	if len(runs) == 0 {
		return ""
	}
	sc := &runs[0].Scenario
	const w, panelH, left, right, top, gap = 760, 130, 60, 20, 40, 34
	h := top + len(runs)*(panelH+gap) + 10
	nb := int(sc.Duration / bin)
	line, lineLabel := limitLine(sc)
	// One y scale for every panel: the largest bin, or twice the line.
	ymax := line * 2
	series := make([][2][]float64, len(runs))
	for i, r := range runs {
		ok, bad := make([]float64, nb), make([]float64, nb)
		for _, a := range r.Arrivals {
			k := int((a.At.UnixNano() - r.Start) / int64(bin))
			if k < 0 || k >= nb {
				continue
			}
			if !a.Throttled {
				ok[k]++
			} else {
				bad[k]++
			}
		}
		for k := range ok {
			ymax = max(ymax, ok[k], bad[k])
		}
		series[i] = [2][]float64{ok, bad}
	}
	ymax = niceCeil(ymax)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14" font-weight="bold">%s — requests per 100 ms at the vendor</text>`+"\n", left, esc(sc.Title))
	fmt.Fprintf(&b, `<text x="%d" y="32" fill="#555">served (solid), throttled 429 (red, dotted), limit line (dashed: %s)</text>`+"\n", left, esc(lineLabel))
	pw := float64(w - left - right)
	for i, r := range runs {
		y0 := float64(top + i*(panelH+gap) + 14)
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" font-weight="bold" fill="%s">%s</text>`+"\n", left, y0-4, color(r.Algo), esc(r.Algo))
		fmt.Fprintf(&b, `<rect x="%d" y="%.0f" width="%.0f" height="%d" fill="none" stroke="#bbb"/>`+"\n", left, y0, pw, panelH)
		ys := func(v float64) float64 { return y0 + panelH - v/ymax*panelH }
		xs := func(k float64) float64 { return float64(left) + (k+0.5)/float64(nb)*pw }
		for _, tick := range []float64{0, ymax / 2, ymax} {
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%.0f</text>`+"\n", left-4, ys(tick)+4, tick)
		}
		if line > 0 {
			fmt.Fprintf(&b, `<line x1="%d" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#000" stroke-dasharray="5,4"/>`+"\n", left, float64(left)+pw, ys(line), ys(line))
		}
		for j, s := range series[i] {
			var pts []string
			for k, v := range s {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xs(float64(k)), ys(v)))
			}
			style := fmt.Sprintf(`stroke="%s" stroke-width="1.6"`, color(r.Algo))
			if j == 1 {
				style = `stroke="#b2182b" stroke-width="1.2" stroke-dasharray="2,2"`
			}
			fmt.Fprintf(&b, `<polyline fill="none" %s points="%s"/>`+"\n", style, strings.Join(pts, " "))
		}
		if i == len(runs)-1 {
			for s := 0; s <= int(sc.Duration/time.Second); s++ {
				x := float64(left) + float64(s)*float64(time.Second)/float64(sc.Duration)*pw
				fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%ds</text>`+"\n", x, y0+panelH+14, s)
			}
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// LatencySVG plots the cumulative distribution of decision latency of
// every algorithm of one scenario, on a log time axis.
func LatencySVG(runs []*RunResult) string {
	if len(runs) == 0 {
		return ""
	}
	sc := &runs[0].Scenario
	const w, h, left, right, top, bottom = 760, 360, 60, 160, 40, 40
	lo, hi := math.Log10(1e3), math.Log10(1e9) // 1µs .. 1s, in ns
	pw, ph := float64(w-left-right), float64(h-top-bottom)
	xs := func(ns float64) float64 {
		v := math.Log10(max(ns, 1e3))
		return float64(left) + (min(v, hi)-lo)/(hi-lo)*pw
	}
	// y: the tail spread out: 0, 0.9, 0.99, 0.999 and 0.9999 evenly.
	ys := func(q float64) float64 {
		v := 4.0
		if q < 0.9999 {
			v = math.Log10(1 / (1 - q))
		}
		return float64(top) + ph - v/4*ph
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14" font-weight="bold">%s — decision latency (CDF)</text>`+"\n", left, esc(sc.Title))
	fmt.Fprintf(&b, `<text x="%d" y="32" fill="#555">share of limiter calls at most x; x log scale, y spread towards the tail (0.9, 0.99, 0.999 evenly)</text>`+"\n", left)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		fmt.Fprintf(&b, `<line x1="%d" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", left, float64(left)+pw, ys(q), ys(q))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#bbb"/>`+"\n", left, top, pw, ph)
	for _, t := range []struct {
		ns    float64
		label string
	}{{1e3, "1µs"}, {1e4, "10µs"}, {1e5, "100µs"}, {1e6, "1ms"}, {1e7, "10ms"}, {1e8, "100ms"}, {1e9, "1s"}} {
		x := xs(t.ns)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%.0f" stroke="#eee"/>`+"\n", x, x, top, float64(top)+ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%s</text>`+"\n", x, float64(top)+ph+14, t.label)
	}
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999, 0.9999} {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%g</text>`+"\n", left-4, ys(q)+4, q)
	}
	for i, r := range runs {
		lat := append([]int64(nil), r.Latencies...)
		sort.Slice(lat, func(a, c int) bool { return lat[a] < lat[c] })
		var pts []string
		n := len(lat)
		step := max(1, n/600)
		for k := 0; k < n; k += step {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", xs(float64(lat[k])), ys(float64(k+1)/float64(n))))
		}
		if n > 0 {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", xs(float64(lat[n-1])), ys(1)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.8" points="%s"/>`+"\n", color(r.Algo), strings.Join(pts, " "))
		ly := top + 14 + i*16
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", w-right+10, w-right+30, ly-4, ly-4, color(r.Algo))
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", w-right+36, ly, esc(r.Algo))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

// flowPalette colours the flows of the flows plot, in order.
var flowPalette = []string{"#d6604d", "#4393c3", "#1b7837", "#8073ac", "#e08214", "#999"}

// FlowsSVG plots, for every algorithm of a scenario with flows, what the
// vendor served of each flow (or group of flows) so far, against the
// first limit's allowance (rate × time plus burst; a compressed hour's
// quota and its paced line), with the total: one panel per algorithm.
func FlowsSVG(runs []*RunResult) string {
	if len(runs) == 0 || len(runs[0].Scenario.Flows) == 0 {
		return ""
	}
	sc := &runs[0].Scenario
	if len(sc.Classes) > 0 && sc.Vendor[0].Kind == KindGCRA {
		return waitsSVG(runs)
	}
	var groups []string
	idx := map[string]int{}
	flowOf := map[string]string{}
	for _, f := range sc.Flows {
		g := flowGroup(f.Name)
		flowOf[f.Name] = g
		if _, ok := idx[g]; !ok {
			idx[g] = len(groups)
			groups = append(groups, g)
		}
	}
	const w, panelH, left, right, top, gap = 760, 170, 60, 120, 40, 34
	h := top + len(runs)*(panelH+gap) + 10
	pw := float64(w - left - right)
	span := float64(sc.Duration)
	l := sc.Vendor[0]
	// The allowance at t ns into the run.
	allow := func(t float64) float64 {
		switch l.Kind {
		case KindGCRA:
			return float64(l.Burst) + float64(l.Rate)*t/float64(l.Period)
		case KindHour:
			return float64(l.Rate) * (1 + math.Floor(t/float64(l.Period)))
		}
		return 0
	}
	type series struct{ ts [][]int64 }
	all := make([]series, len(runs))
	ymax := allow(span)
	if l.Kind == KindHour { // the first hour's quota, and a little room
		ymax = float64(l.Rate) * 1.2
	}
	for i, r := range runs {
		s := series{ts: make([][]int64, len(groups)+1)}
		for _, a := range r.Arrivals {
			g, ok := flowOf[a.Scope]
			if !ok || a.Throttled {
				continue
			}
			t := a.At.UnixNano() - r.Start
			s.ts[idx[g]] = append(s.ts[idx[g]], t)
			s.ts[len(groups)] = append(s.ts[len(groups)], t)
		}
		for _, ts := range s.ts {
			sort.Slice(ts, func(a, b int) bool { return ts[a] < ts[b] })
		}
		ymax = max(ymax, float64(len(s.ts[len(groups)])))
		all[i] = s
	}
	ymax = niceCeil(ymax)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14" font-weight="bold">%s — served so far, per flow</text>`+"\n", left, esc(sc.Name))
	what := "the limit's allowance, burst + rate × time"
	if l.Kind == KindHour {
		what = "the hour's quota, and its paced line"
	}
	fmt.Fprintf(&b, `<text x="%d" y="32" fill="#555">requests the vendor served, by arrival; all flows (black); dashed: %s</text>`+"\n", left, what)
	for i, r := range runs {
		y0 := float64(top + i*(panelH+gap) + 14)
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" font-weight="bold" fill="%s">%s</text>`+"\n", left, y0-4, color(r.Algo), esc(r.Algo))
		fmt.Fprintf(&b, `<rect x="%d" y="%.0f" width="%.0f" height="%d" fill="none" stroke="#bbb"/>`+"\n", left, y0, pw, panelH)
		ys := func(v float64) float64 { return y0 + panelH - v/ymax*panelH }
		xs := func(t float64) float64 { return float64(left) + t/span*pw }
		for _, tick := range []float64{0, ymax / 2, ymax} {
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%.0f</text>`+"\n", left-4, ys(tick)+4, tick)
		}
		for _, ph := range phases(sc)[1:] { // the phases' boundaries
			if ph < sc.Duration {
				fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#ccc" stroke-dasharray="3,3"/>`+"\n", xs(float64(ph)), xs(float64(ph)), y0, y0+panelH)
			}
		}
		// The allowance, dashed.
		var pts []string
		for k := 0; k <= 200; k++ {
			t := span * float64(k) / 200
			if a := allow(t); a <= ymax {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xs(t), ys(a)))
			}
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="#000" stroke-dasharray="5,4" points="%s"/>`+"\n", strings.Join(pts, " "))
		if l.Kind == KindHour { // the paced line: from 1% of the quota at the start to all of it 1% before the end
			p := float64(l.Period)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000" stroke-dasharray="2,3"/>`+"\n",
				xs(0), ys(float64(l.Rate)/100), xs(min(p*0.99, span)), ys(float64(l.Rate)))
		}
		for g, ts := range all[i].ts {
			c, wd := "#000", "1.2"
			if g < len(groups) {
				c, wd = flowPalette[g%len(flowPalette)], "1.8"
			}
			pts = pts[:0]
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", xs(0), ys(0)))
			step := max(1, len(ts)/400)
			for k := 0; k < len(ts); k += step {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xs(float64(ts[k])), ys(float64(k+1))))
			}
			if n := len(ts); n > 0 {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xs(float64(ts[n-1])), ys(float64(n))), fmt.Sprintf("%.1f,%.1f", xs(span), ys(float64(n))))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="%s" points="%s"/>`+"\n", c, wd, strings.Join(pts, " "))
		}
		for g, name := range append(append([]string(nil), groups...), "all") {
			c := "#000"
			if g < len(groups) {
				c = flowPalette[g%len(flowPalette)]
			}
			ly := y0 + 12 + float64(g)*15
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.0f" y2="%.0f" stroke="%s" stroke-width="3"/>`+"\n", w-right+10, w-right+30, ly-4, ly-4, c)
			fmt.Fprintf(&b, `<text x="%d" y="%.0f">%s</text>`+"\n", w-right+36, ly, esc(name))
		}
		if i == len(runs)-1 {
			for _, tk := range flowTicks(sc) {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%s</text>`+"\n", xs(float64(tk.at)), y0+panelH+14, tk.label)
			}
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

type tick struct {
	at    time.Duration
	label string
}

// flowTicks are the x-axis labels of the flows plot: seconds, or the
// compressed clock's minutes.
func flowTicks(sc *Scenario) []tick {
	var out []tick
	if sc.Compress > 1 {
		step := time.Duration(float64(10*time.Minute) / sc.Compress)
		for t, m := time.Duration(0), 0; t <= sc.Duration; t, m = t+step, m+10 {
			out = append(out, tick{t, fmt.Sprintf("%d min", m)})
		}
		return out
	}
	step := time.Second
	if sc.Duration > 20*time.Second {
		step = 5 * time.Second
	}
	for t := time.Duration(0); t <= sc.Duration; t += step {
		out = append(out, tick{t, fmt.Sprintf("%gs", t.Seconds())})
	}
	return out
}

// waitsSVG plots, for every algorithm of a scenario with priority
// classes over a GCRA limit, the wait of each request of the top class
// against its intent time (refused ones marked at the top), over the
// lower classes' waits in grey.
func waitsSVG(runs []*RunResult) string {
	sc := &runs[0].Scenario
	top := sc.Classes[0]
	const w, panelH, left, right, top0, gap = 760, 150, 60, 120, 40, 34
	h := top0 + len(runs)*(panelH+gap) + 10
	pw := float64(w - left - right)
	span := float64(sc.Duration)
	ymax := float64(sc.MaxWait)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14" font-weight="bold">%s — each request's wait for its slot</text>`+"\n", left, esc(sc.Name))
	fmt.Fprintf(&b, `<text x="%d" y="32" fill="#555">%s requests (red dots; refused: red x at the top), the other classes (grey); the store's reserved wait</text>`+"\n", left, esc(top))
	for i, r := range runs {
		y0 := float64(top0 + i*(panelH+gap) + 14)
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" font-weight="bold" fill="%s">%s</text>`+"\n", left, y0-4, color(r.Algo), esc(r.Algo))
		fmt.Fprintf(&b, `<rect x="%d" y="%.0f" width="%.0f" height="%d" fill="none" stroke="#bbb"/>`+"\n", left, y0, pw, panelH)
		ys := func(v float64) float64 { return y0 + panelH - min(v, ymax)/ymax*panelH }
		xs := func(t float64) float64 { return float64(left) + t/span*pw }
		for _, tk := range []float64{0, ymax / 2, ymax} {
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", left-4, ys(tk)+4, dur(time.Duration(tk)))
		}
		var lower, upper, refused strings.Builder
		n := 0
		for _, rec := range r.Records {
			t := float64(rec.At - r.Start)
			isTop := sc.Flows[rec.Flow].Class == top
			switch {
			case isTop && rec.Out == OutRefused:
				x, y := xs(t), ys(ymax)
				fmt.Fprintf(&refused, "M%.1f %.1fl6 6m0 -6l-6 6", x-3, y-3)
			case isTop && rec.Wait >= 0:
				fmt.Fprintf(&upper, `<circle cx="%.1f" cy="%.1f" r="2.5"/>`, xs(t), ys(float64(rec.Wait)))
			case !isTop && rec.Wait >= 0:
				if n++; n%4 == 0 { // a sample: the lower classes are many
					fmt.Fprintf(&lower, `<circle cx="%.1f" cy="%.1f" r="1"/>`, xs(t), ys(float64(rec.Wait)))
				}
			}
		}
		fmt.Fprintf(&b, `<g fill="#bbb">%s</g>`+"\n", lower.String())
		fmt.Fprintf(&b, `<g fill="#d6604d">%s</g>`+"\n", upper.String())
		if refused.Len() > 0 {
			fmt.Fprintf(&b, `<path fill="none" stroke="#b2182b" stroke-width="1.5" d="%s"/>`+"\n", refused.String())
		}
		if i == len(runs)-1 {
			for _, tk := range flowTicks(sc) {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%s</text>`+"\n", xs(float64(tk.at)), y0+panelH+14, tk.label)
			}
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}
