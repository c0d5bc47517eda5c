package quota

// SweepBatch is sweepBatch: the most keys of a shard one decision examines.
const SweepBatch = sweepBatch

// ShardOf returns the index of the shard that holds the state of tag.
func (m *MemoryStore) ShardOf(tag string) int { return m.shard(SafeKey(tag)).id }

// Holes returns how many holes (runs of cancelled reservations) the GCRA
// key key of tag keeps.
func (m *MemoryStore) Holes(tag, key string) int {
	s := m.shard(SafeKey(tag))
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.lookup(s.ref(SafeKey(tag), key)); e != nil {
		return len(e.cell.holes)
	}
	return 0
}
