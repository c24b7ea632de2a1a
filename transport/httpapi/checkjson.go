package httpapi

import (
	"math"
	"unicode/utf8"
)

// The fields of a CheckRequest, as bits of what quickCheck has seen.
const (
	seenPolicy = 1 << iota
	seenPolicies
	seenKey
	seenCost
	seenRequestID
	seenTier
)

// quickCheck decodes data as a CheckRequest when it has the plain shape clients send: one object
// of the six fields, each at most once and spelt exactly, their strings without escapes, control
// characters or invalid UTF-8, cost a whole number, nothing after the object but white space. It
// reports false for anything else, which decodeCheck then gives to encoding/json: what quickCheck
// accepts, encoding/json decodes to the same CheckRequest (FuzzQuickCheck), and every error is
// encoding/json's.
func quickCheck(data []byte) (CheckRequest, bool) {
	var req CheckRequest
	p := quickParser{data: data}
	if !p.byte('{') {
		return req, false
	}
	seen := 0
	for first := true; ; first = false {
		if p.byte('}') {
			break
		}
		if !first && !p.byte(',') {
			return req, false
		}
		name, ok := p.str()
		if !ok || !p.byte(':') {
			return req, false
		}
		var bit int
		switch string(name) {
		case "policy":
			bit = seenPolicy
			req.Policy, ok = p.text()
		case "policies":
			bit = seenPolicies
			req.Policies, ok = p.texts()
		case "key":
			bit = seenKey
			req.Key, ok = p.text()
		case "cost":
			bit = seenCost
			var cost int64
			if cost, ok = p.int(); ok {
				req.Cost = &cost
			}
		case "request_id":
			bit = seenRequestID
			req.RequestID, ok = p.text()
		case "tier":
			bit = seenTier
			req.Tier, ok = p.text()
		}
		if !ok || bit == 0 || seen&bit != 0 {
			return req, false
		}
		seen |= bit
	}
	p.space()
	return req, p.i == len(data)
}

// quickParser reads the plain JSON quickCheck accepts, from data[i:].
type quickParser struct {
	data []byte
	i    int
}

// space skips JSON's white space.
func (p *quickParser) space() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// byte skips white space and c, reporting whether c was there; if not, it reads nothing more.
func (p *quickParser) byte(c byte) bool {
	p.space()
	if p.i < len(p.data) && p.data[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads a string without escapes, control characters or invalid UTF-8, its bytes not copied.
func (p *quickParser) str() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	start, ascii := p.i, true
	for ; p.i < len(p.data); p.i++ {
		switch c := p.data[p.i]; {
		case c == '"':
			s := p.data[start:p.i]
			p.i++
			return s, ascii || utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// text reads a string as str does, copied.
func (p *quickParser) text() (string, bool) {
	s, ok := p.str()
	return string(s), ok
}

// texts reads a non-empty array of strings.
func (p *quickParser) texts() ([]string, bool) {
	if !p.byte('[') {
		return nil, false
	}
	var out []string
	for {
		s, ok := p.text()
		if !ok {
			return nil, false
		}
		out = append(out, s)
		if p.byte(']') {
			return out, true
		}
		if !p.byte(',') {
			return nil, false
		}
	}
}

// int reads a whole number in JSON's grammar (no fraction, no exponent) that fits an int64.
func (p *quickParser) int() (int64, bool) {
	p.space()
	neg := p.i < len(p.data) && p.data[p.i] == '-'
	if neg {
		p.i++
	}
	limit := uint64(math.MaxInt64)
	if neg {
		limit++
	}
	digits := p.i
	var n uint64
	for ; p.i < len(p.data) && '0' <= p.data[p.i] && p.data[p.i] <= '9'; p.i++ {
		if n > (limit-uint64(p.data[p.i]-'0'))/10 {
			return 0, false
		}
		n = n*10 + uint64(p.data[p.i]-'0')
	}
	switch {
	case p.i == digits, p.data[digits] == '0' && p.i > digits+1:
		return 0, false
	case p.i < len(p.data) && (p.data[p.i] == '.' || p.data[p.i] == 'e' || p.data[p.i] == 'E'):
		return 0, false
	case neg:
		return int64(-n), true
	}
	return int64(n), true
}
