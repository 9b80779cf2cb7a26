// Package pb is the little of protobuf's wire format the app needs to write OTLP traces and
// pprof profiles by hand (the standard library has no protobuf): varints, tags, length-delimited
// fields and fixed64.
package pb

import "math"

// Buf accumulates one message.
type Buf struct{ B []byte }

func (b *Buf) varint(v uint64) {
	for v >= 0x80 {
		b.B = append(b.B, byte(v)|0x80)
		v >>= 7
	}
	b.B = append(b.B, byte(v))
}

func (b *Buf) tag(field, wire int) { b.varint(uint64(field)<<3 | uint64(wire)) }

// Uint writes a varint field (also int64 and enums); zero values are left out, as proto3 does.
func (b *Buf) Uint(field int, v uint64) {
	if v == 0 {
		return
	}
	b.tag(field, 0)
	b.varint(v)
}

// Int writes an int64 varint field.
func (b *Buf) Int(field int, v int64) { b.Uint(field, uint64(v)) }

// Bool writes a bool field.
func (b *Buf) Bool(field int, v bool) {
	if v {
		b.Uint(field, 1)
	}
}

// Fixed64 writes a fixed64 field.
func (b *Buf) Fixed64(field int, v uint64) {
	if v == 0 {
		return
	}
	b.tag(field, 1)
	for i := 0; i < 8; i++ {
		b.B = append(b.B, byte(v>>(8*i)))
	}
}

// Double writes a double field.
func (b *Buf) Double(field int, v float64) { b.Fixed64(field, math.Float64bits(v)) }

// Bytes writes a length-delimited field (always, even when empty: repeated strings keep "").
func (b *Buf) Bytes(field int, v []byte) {
	b.tag(field, 2)
	b.varint(uint64(len(v)))
	b.B = append(b.B, v...)
}

// String writes a string field; empty strings are left out.
func (b *Buf) String(field int, s string) {
	if s != "" {
		b.Bytes(field, []byte(s))
	}
}

// Msg writes a nested message built by fill.
func (b *Buf) Msg(field int, fill func(m *Buf)) {
	var m Buf
	fill(&m)
	b.Bytes(field, m.B)
}

// PackedUint writes a packed repeated varint field.
func (b *Buf) PackedUint(field int, vs []uint64) {
	if len(vs) == 0 {
		return
	}
	var m Buf
	for _, v := range vs {
		m.varint(v)
	}
	b.Bytes(field, m.B)
}

// PackedInt writes a packed repeated int64 field.
func (b *Buf) PackedInt(field int, vs []int64) {
	if len(vs) == 0 {
		return
	}
	var m Buf
	for _, v := range vs {
		m.varint(uint64(v))
	}
	b.Bytes(field, m.B)
}
