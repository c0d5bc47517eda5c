package quota

// leadAll raises the theoretical arrival time of every GCRA item to at
// least from, the store's now plus the request's Lead (Request.Lead): the
// limit then decides and charges as if its schedule were taken up to
// from. With tat at least from, a charge of cost k at slot t occupies the
// schedule from max(tat, t) >= from on, and each of its k slots may be
// spent at any time from t up to from (docs/decisions.md, "Quota taken
// ahead"). A pause's drain (drainPaused) raises it further.
func leadAll(items []item, from int64) {
	for i := range items {
		if it := &items[i]; it.lim.Kind == GCRA {
			it.tat = max(it.tat, from)
		}
	}
}
