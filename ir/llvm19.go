package ir

import (
	"bytes"
	"fmt"
	"strings"

	llir "github.com/llir/llvm/ir"
)

// text returns llir's text for m, turning llir's panics (bad IDs, malformed
// operands) into errors.
func text(m *llir.Module) (s string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("ir: printing module: %v", r)
		}
	}()
	var b strings.Builder
	if _, err := m.WriteTo(&b); err != nil {
		return "", err
	}
	return b.String(), nil
}

// LLVM19Text returns m as LLVM 19 assembly: llir prints LLVM 14 text with
// typed pointers, and every pointer type is rewritten to an opaque pointer
// (`T addrspace(N)*` → `ptr addrspace(N)`, `T*` → `ptr`), including pointers
// nested in function, struct, array and vector types, in byval(...)
// attributes, constant expressions and metadata. String literals (inline asm
// text, metadata strings) are left alone. The result is for llc-19
// (`llc-19 -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90a -mattr=+ptx80`).
func LLVM19Text(m *llir.Module) (string, error) {
	s, err := text(m)
	if err != nil {
		return "", err
	}
	return OpaquePointers(s)
}

// OpaquePointers rewrites LLVM IR text with typed pointers into opaque
// pointers (see LLVM19Text). It fails on a '*' that does not follow a type.
func OpaquePointers(src string) (string, error) {
	out := []byte{}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch c {
		case '"':
			// Copy a string literal verbatim (llir escapes '"' as \22).
			j := strings.IndexByte(src[i+1:], '"')
			if j < 0 {
				return "", fmt.Errorf("ir: unterminated string literal at byte %d", i)
			}
			out = append(out, src[i:i+j+2]...)
			i += j + 1
		case ';':
			// Comment to end of line.
			j := strings.IndexByte(src[i:], '\n')
			if j < 0 {
				j = len(src) - i
			}
			out = append(out, src[i:i+j]...)
			i += j - 1
		case '*':
			start, as, err := pointeeStart(out)
			if err != nil {
				line := 1 + strings.Count(src[:i], "\n")
				return "", fmt.Errorf("ir: line %d: %v", line, err)
			}
			out = out[:start]
			out = append(out, "ptr"...)
			if as != "" {
				out = append(out, " addrspace("+as+")"...)
			}
		default:
			out = append(out, c)
		}
	}
	return string(out), nil
}

// pointeeStart finds, in the text b that precedes a '*', where the pointee
// type starts (the optional ` addrspace(N)` is part of the span) and returns
// that offset and N ("" for generic).
func pointeeStart(b []byte) (int, string, error) {
	i := len(b)
	as := ""
	// Optional "addrspace(N)".
	if i > 0 && b[i-1] == ')' {
		j := i - 1
		for j > 0 && b[j-1] >= '0' && b[j-1] <= '9' {
			j--
		}
		const kw = "addrspace("
		if j >= len(kw) && string(b[j-len(kw):j]) == kw && j < i-1 {
			as = string(b[j : i-1])
			i = j - len(kw)
			for i > 0 && b[i-1] == ' ' {
				i--
			}
		}
	}
	start, err := typeStart(b, i)
	if err != nil {
		return 0, "", err
	}
	return start, as, nil
}

// typeStart returns where the type that ends at b[:end] starts.
func typeStart(b []byte, end int) (int, error) {
	i := end
	for i > 0 && b[i-1] == ' ' {
		i--
	}
	if i == 0 {
		return 0, fmt.Errorf("'*' without a pointee type")
	}
	switch c := b[i-1]; c {
	case ')':
		// An already rewritten "ptr addrspace(N)".
		if j := bytes.LastIndex(b[:i], []byte("ptr addrspace(")); j >= 0 && allDigits(b[j+len("ptr addrspace("):i-1]) &&
			(j == 0 || !isIdentByte(b[j-1])) {
			return j, nil
		}
		// Function type: ret (params). Match the parenthesis, then the
		// return type.
		open, err := matchOpen(b, i-1, '(', ')')
		if err != nil {
			return 0, err
		}
		return typeStart(b, open)
	case ']':
		return matchOpen(b, i-1, '[', ']')
	case '}':
		open, err := matchOpen(b, i-1, '{', '}')
		if err != nil {
			return 0, err
		}
		return open, nil
	case '>':
		// Vector <n x T> or packed struct <{...}>.
		return matchOpen(b, i-1, '<', '>')
	default:
		j := i
		for j > 0 && isIdentByte(b[j-1]) {
			j--
		}
		if j == i {
			return 0, fmt.Errorf("'*' after %q, not a type", string(b[max(0, i-10):i]))
		}
		word := string(b[j:i])
		if j > 0 && b[j-1] == '%' {
			return j - 1, nil // named type %T
		}
		if !isTypeWord(word) {
			return 0, fmt.Errorf("'*' after %q, not a type", word)
		}
		return j, nil
	}
}

func isIdentByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '$'
}

func isTypeWord(w string) bool {
	switch w {
	case "void", "half", "bfloat", "float", "double", "x86_fp80", "fp128", "ppc_fp128", "label",
		"metadata", "x86_mmx", "token", "ptr", "opaque":
		return true
	}
	if len(w) > 1 && w[0] == 'i' {
		for _, c := range w[1:] {
			if c < '0' || c > '9' {
				return false
			}
		}
		return true
	}
	return false
}

// matchOpen returns the index of the opening bracket matching the closing
// bracket at b[close].
func matchOpen(b []byte, close int, open, closeCh byte) (int, error) {
	depth := 0
	for i := close; i >= 0; i-- {
		switch b[i] {
		case closeCh:
			depth++
		case open:
			depth--
			if depth == 0 {
				return i, nil
			}
		}
	}
	return 0, fmt.Errorf("unbalanced %c%c in type", open, closeCh)
}

func allDigits(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
