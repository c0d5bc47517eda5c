package quota

// SweepBatch is sweepBatch: the most keys of a shard one decision examines.
const SweepBatch = sweepBatch

// ShardOf returns the index of the shard that holds the state of tag.
func (m *MemoryStore) ShardOf(tag string) int { return m.shard(SafeKey(tag)).id }
