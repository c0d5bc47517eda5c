package redisstore

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fleetquota/throttle/quota"
)

// This file owns the store's physical layout: every Redis key the store
// reads or writes is written by writeKey, and ParseKey is its inverse.
//
//	<prefix>{<tag>}:<key>              KeyItem
//	<prefix>{<tag>}:!pause:<key>       KeyPause
//	<prefix>{<tag>}:!cancelled:<key>   KeyCancelled
//	<prefix>{<tag>}:!learned:<key>     KeyLearned
//	<prefix>{<tag>}:!lane<k>:<key>     KeyLane (k a class index, in decimal)
//	<prefix>{<tag>}:!seen:<key>        KeySeen
//	<prefix>{<tag>}:!cancelled:!lane<k>:<key>
//	                                   KeyCancelled, of lane k
//	<prefix>{<filler>}:!copy:{<tag>}:!pause:<key>
//	                                   a pause's copy (writeCopy; on a Ring,
//	                                   the filler is the tag: ringCopyKey)
//	<prefix>{<tag>}:!reason:<key>      why the pause was set (reasonKey)
//	<prefix>{!refusals}:<provider>:<limit>
//	                                   recent refusals (refusalKey)
//
// tag and key pass through quota.SafeKey, so neither holds a brace and no
// key starts with "!": a namespace ("!pause:", "!cancelled:") is never
// mistaken for an item key, and "}:" ends the tag. What the tag and key
// hold (provider, tenant, limit, scope value) is package providers'
// layout; this one only places them. A pause's copy is the pause's own key
// (after the prefix) behind a hash tag of one slot, a filler (slots.go):
// Redis Cluster hashes the first braces' content alone, so the copy lives
// in the filler's slot, and "!copy:" (no tag's key starts with "!") keeps
// it apart from the filler's own keys should a tag ever equal a filler.
// ParseKey does not return copies, reasons or the refusals' record: their
// keys after the tag start with "!" outside the namespaces it knows, or
// their tag does ("!refusals"), which SafeKey never makes. A lane's
// namespace carries its class index ("!lane0:", "!lane1:"), so it is
// written by laneKey and read by ParseKey apart from the fixed
// namespaces; a lane's record of cancelled slots is the lane key's own
// KeyCancelled companion.

// A KeyKind says what a Redis key of the store holds.
type KeyKind uint8

const (
	// KeyItem is a limit's state: a GCRA limit's stored arrival time,
	// a window's counts or a rolling window's bucket counts.
	KeyItem KeyKind = iota
	// KeyPause is a pause: the time until which requests that name it
	// are held back.
	KeyPause
	// KeyCancelled is the companion of a GCRA item key that records the
	// slots cancelled reservations gave back. Its place in the layout is
	// reserved here so that ParseKey knows it and Reset deletes it with
	// its item.
	KeyCancelled
	// KeyLearned is the companion of a learning GCRA limit's item key
	// that records the limit the vendor stated (package quota's doc,
	// "Learning"): a hash of the figure and the slot time of the
	// reservation whose response stated it.
	KeyLearned
	// KeySeen is the companion of a Window, Rolling or Concurrency item
	// key whose limit has priority classes (quota.Limit.Reserve): a hash
	// from class index to the time (µs) the class last had a request
	// admitted, which tells a lower class whose reserve to leave.
	KeySeen
	// KeyLane is a lane of a GCRA item whose limit has priority classes:
	// the stored theoretical arrival time of class k's lane, for each k
	// but the bottom one, whose lane is the item key itself. ParseKey
	// returns the item key, not the lane's index.
	KeyLane
)

// spaces are the namespaces that follow the tag, by kind. A lane's is
// "!lane", its class index and ":" (laneKey).
var spaces = [...]string{KeyItem: "", KeyPause: "!pause:", KeyCancelled: "!cancelled:", KeyLearned: "!learned:",
	KeySeen: "!seen:", KeyLane: "!lane"}

// String returns "item", "pause", "cancelled", "learned", "seen" or "lane".
func (k KeyKind) String() string {
	switch k {
	case KeyItem:
		return "item"
	case KeyPause:
		return "pause"
	case KeyCancelled:
		return "cancelled"
	case KeyLearned:
		return "learned"
	case KeySeen:
		return "seen"
	case KeyLane:
		return "lane"
	}
	return fmt.Sprintf("KeyKind(%d)", uint8(k))
}

// keyLen is the length of the key writeKey writes.
func keyLen(prefix string, kind KeyKind, tag, key string) int {
	return len(prefix) + len("{}:") + len(tag) + len(spaces[kind]) + len(key)
}

// writeKey writes the Redis key of kind for tag and key, which must
// already be quota.SafeKey of the caller's: the one place that writes the
// layout.
func writeKey(b *strings.Builder, prefix string, kind KeyKind, tag, key string) {
	b.WriteString(prefix)
	b.WriteByte('{')
	b.WriteString(tag)
	b.WriteString("}:")
	b.WriteString(spaces[kind])
	b.WriteString(key)
}

// copySpace follows a copy's filler tag; see writeCopy.
const copySpace = "!copy:"

// copyLen is the length of the key writeCopy writes.
func copyLen(prefix, filler, tag, key string) int {
	return len(prefix) + len("{}:") + len(filler) + len(copySpace) + keyLen("", KeyPause, tag, key)
}

// writeCopy writes the Redis key of the copy, in the slot whose filler is
// filler, of the pause key within tag (both quota.SafeKey already):
// <prefix>{<filler>}:!copy:{<tag>}:!pause:<key>.
func writeCopy(b *strings.Builder, prefix, filler, tag, key string) {
	b.WriteString(prefix)
	b.WriteByte('{')
	b.WriteString(filler)
	b.WriteString("}:")
	b.WriteString(copySpace)
	writeKey(b, "", KeyPause, tag, key)
}

// copyKeys returns the Redis keys of the copies of the pause key within
// tag, one per slot, in slot order: what a request whose Over it is reads
// on a Redis Cluster (Store.PauseOver).
func (s *Store) copyKeys(tag, key string) []string {
	tag, key = quota.SafeKey(tag), quota.SafeKey(key)
	ft := fillers()
	keys := make([]string, slots)
	for sl := range keys {
		f := ft.filler(sl)
		var b strings.Builder
		b.Grow(copyLen(s.prefix, f, tag, key))
		writeCopy(&b, s.prefix, f, tag, key)
		keys[sl] = b.String()
	}
	return keys
}

// redisKey returns the Redis key of kind for the caller's tag and key.
func (s *Store) redisKey(kind KeyKind, tag, key string) string {
	tag, key = quota.SafeKey(tag), quota.SafeKey(key)
	var b strings.Builder
	b.Grow(keyLen(s.prefix, kind, tag, key))
	writeKey(&b, s.prefix, kind, tag, key)
	return b.String()
}

// Key returns the Redis key of the item key key within tag, as Reserve
// builds it: <prefix>{<tag>}:<key>, with tag and key made safe as
// described in the package doc.
func (s *Store) Key(tag, key string) string { return s.redisKey(KeyItem, tag, key) }

// PauseKey returns the Redis key of the pause key within tag, as Reserve
// and Pause build it: <prefix>{<tag>}:!pause:<key>.
func (s *Store) PauseKey(tag, key string) string { return s.redisKey(KeyPause, tag, key) }

// Prefix returns the prefix that starts every key of the store.
func (s *Store) Prefix() string { return s.prefix }

// ParseKey is the inverse of the store's layout: it splits a Redis key of
// the store into the tag as it appears between the braces (quota.SafeKey
// of the request's tag), the key within the tag (an item key, or the
// pause key or item key after the namespace) and the kind. ok is false for
// a key the store could not have made.
func (s *Store) ParseKey(k string) (tag, key string, kind KeyKind, ok bool) {
	rest, found := strings.CutPrefix(k, s.prefix)
	if !found || !strings.HasPrefix(rest, "{") {
		return "", "", 0, false
	}
	tag, key, found = strings.Cut(rest[1:], "}:")
	if !found || tag == "" || quota.SafeKey(tag) != tag {
		return "", "", 0, false
	}
	kind = KeyItem
	for k := KeyPause; k < KeyLane; k++ {
		if after, in := strings.CutPrefix(key, spaces[k]); in {
			kind, key = k, after
			break
		}
	}
	// A lane's key, or (after "!cancelled:") a lane's record of
	// cancelled slots.
	if after, lane := cutLane(key); lane >= 0 && (kind == KeyItem || kind == KeyCancelled) {
		key = after
		if kind == KeyItem {
			kind = KeyLane
		}
	}
	if key == "" || quota.SafeKey(key) != key {
		return "", "", 0, false
	}
	return tag, key, kind, true
}

// TagMatch returns the SCAN MATCH pattern, after the store's prefix (as
// NewKeyScan takes it), of every key within tag.
func TagMatch(tag string) string {
	var b strings.Builder
	writeKey(&b, "", KeyItem, quota.SafeKey(tag), "")
	return escapePattern(b.String()) + "*"
}

// cutLane cuts a lane's namespace, "!lane<k>:" with k in decimal without
// leading zeros, off the front of key and returns the rest and k; k is
// -1 when key starts with none.
func cutLane(key string) (string, int) {
	rest, ok := strings.CutPrefix(key, spaces[KeyLane])
	if !ok {
		return key, -1
	}
	digits, after, ok := strings.Cut(rest, ":")
	if !ok || digits == "" || len(digits) > 4 || (digits[0] == '0' && len(digits) > 1) {
		return key, -1
	}
	k := 0
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if c < '0' || c > '9' {
			return key, -1
		}
		k = 10*k + int(c-'0')
	}
	return after, k
}

// LaneKey returns the Redis key of class k's lane of the GCRA item key
// within tag whose limit has priority classes: <prefix>{<tag>}:!lane<k>:<key>
// for a class above the bottom one, whose lane is the item key itself
// (Key). Tools read it to show a class's own headroom.
func (s *Store) LaneKey(tag, key string, k int) string { return s.laneKey(s.Key(tag, key), k) }

// laneKey returns the key of lane k beside the item whose Redis key is
// itemKey, as companion does; lane k must not be the bottom one.
func (s *Store) laneKey(itemKey string, k int) string {
	i := s.afterTag(itemKey)
	return itemKey[:i] + spaces[KeyLane] + strconv.Itoa(k) + ":" + itemKey[i:]
}

// seenKey returns the KeySeen key beside the item whose Redis key is
// itemKey, as cancelledKey does.
func (s *Store) seenKey(itemKey string) string { return s.companion(itemKey, KeySeen) }

// cancelledKey returns the KeyCancelled key beside the item whose Redis
// key is itemKey. Cancel derives it from the key the reservation already
// holds instead of keeping the tag and item key for it.
func (s *Store) cancelledKey(itemKey string) string { return s.companion(itemKey, KeyCancelled) }

// learnedKey returns the KeyLearned key beside the item whose Redis key
// is itemKey, as cancelledKey does.
func (s *Store) learnedKey(itemKey string) string { return s.companion(itemKey, KeyLearned) }

// companion returns the key of kind beside the item whose Redis key, as
// writeKey wrote it, is itemKey: the same tag and key with the namespace
// after "}:". The tag holds no "}" (quota.SafeKey), so the first "}:"
// after the prefix ends it.
func (s *Store) companion(itemKey string, kind KeyKind) string {
	i := s.afterTag(itemKey)
	return itemKey[:i] + spaces[kind] + itemKey[i:]
}

// reasonSpace follows the tag of a reason key.
const reasonSpace = "!reason:"

// reasonKey returns the Redis key of the reason of the pause key within
// tag.
func (s *Store) reasonKey(tag, key string) string {
	tag, key = quota.SafeKey(tag), quota.SafeKey(key)
	var b strings.Builder
	b.Grow(keyLen(s.prefix, KeyItem, tag, key) + len(reasonSpace))
	writeKey(&b, s.prefix, KeyItem, tag, reasonSpace+key)
	return b.String()
}

// refusalsTag is the hash tag of the record.
const refusalsTag = "!refusals"

// refusalKey returns the Redis key of k's record: provider and limit
// each made a quota.SafePart, which holds no ":", joined by one.
func (s *Store) refusalKey(k RefusalKey) string {
	key := quota.SafePart(k.Provider) + ":" + quota.SafePart(k.Limit)
	var b strings.Builder
	b.Grow(keyLen(s.prefix, KeyItem, refusalsTag, key))
	writeKey(&b, s.prefix, KeyItem, refusalsTag, key)
	return b.String()
}

// ringCopyKey returns the Redis key of the copy of the pause key within
// tag that a tenant's decision reads on its own shard of a Ring.
func (s *Store) ringCopyKey(tag, key string) string {
	tag, key = quota.SafeKey(tag), quota.SafeKey(key)
	var b strings.Builder
	b.Grow(copyLen(s.prefix, tag, tag, key))
	writeCopy(&b, s.prefix, tag, tag, key)
	return b.String()
}

// afterTag returns the index in itemKey, a key writeKey wrote, of what
// follows the tag's "}:".
func (s *Store) afterTag(itemKey string) int {
	return len(s.prefix) + strings.Index(itemKey[len(s.prefix):], "}:") + len("}:")
}
