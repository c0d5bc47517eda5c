package redisstore

import (
	"strconv"
	"sync"
)

// Redis Cluster slots, for the copies of a pause that requests in other
// tags read (their quota.Request.Over; see writeCopy). A cluster refuses a
// script whose keys are in different slots, but it checks slots, not
// tags: a key whose hash tag is a filler of the request's slot may sit
// beside the request's own keys.

// slots is the number of hash slots of a Redis Cluster.
const slots = 16384

// crcTable is CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0),
// the checksum Redis Cluster hashes keys with, a byte at a time.
var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// slot returns the hash slot of a key whose hash tag is tag (non-empty),
// as Redis Cluster computes it: CRC16 of the tag, modulo 16384.
func slot(tag string) int {
	var c uint16
	for i := 0; i < len(tag); i++ {
		c = c<<8 ^ crcTable[byte(c>>8)^tag[i]]
	}
	return int(c) % slots
}

// fillerTable holds, per slot, the shortest base-36 numeral (the first
// in counting order) that hashes to it: numerals 0 to 87,572 (at most 4
// characters) fill every slot. They are stored end to end in all, slot by
// slot, and ends[s] is where slot s's ends; 48 KB and 32 KB.
type fillerTable struct {
	all  string
	ends [slots]uint16
}

// fillers returns the table, computed on first use: the stores of a
// process that never pause over a cluster never pay for it. Computing it
// takes a few milliseconds (TestFillers logs it).
var fillers = sync.OnceValue(func() *fillerTable {
	var first [slots]int32
	for i := range first {
		first[i] = -1
	}
	var buf [8]byte
	for n, left := int64(0), slots; left > 0; n++ {
		s := slot(string(strconv.AppendInt(buf[:0], n, 36)))
		if first[s] < 0 {
			first[s] = int32(n)
			left--
		}
	}
	t := &fillerTable{}
	b := make([]byte, 0, 48*1024)
	for s, n := range first {
		b = strconv.AppendInt(b, int64(n), 36)
		t.ends[s] = uint16(len(b))
	}
	t.all = string(b)
	return t
})

// filler returns a hash tag of slot s: a short string whose slot is s.
func (t *fillerTable) filler(s int) string {
	start := 0
	if s > 0 {
		start = int(t.ends[s-1])
	}
	return t.all[start:t.ends[s]]
}
