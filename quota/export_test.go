package quota

import "strings"

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

// FairSet returns how many tenants the active set of the Fair item key
// of tag holds, and the sum of their weights.
func (m *MemoryStore) FairSet(tag, key string) (members int, sum int64) {
	tag = SafeKey(tag)
	s := m.shard(tag)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.lookup(s.ref(tag, fairSetKey(key))); e != nil && e.cls != nil && e.cls.fair != nil {
		return len(e.cls.fair.members), e.cls.fair.sum
	}
	return 0, 0
}

// Keys returns the keys of tag the store holds, idle or not.
func (m *MemoryStore) Keys(tag string) []string {
	tag = SafeKey(tag)
	s := m.shard(tag)
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.keys {
		if t, key, _ := strings.Cut(k, "\x00"); t == tag {
			keys = append(keys, key)
		}
	}
	return keys
}
