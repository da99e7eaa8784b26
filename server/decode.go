package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"
)

const (
	// maxRequestBody is the transport limit on any request body.
	maxRequestBody = 4 << 20
	// maxJSONBody is the limit on an API request's JSON body: names, titles and
	// passwords need far less, and a small limit keeps bad input cheap.
	maxJSONBody = 64 << 10
	// maxNameLen is the limit on names and titles, in characters.
	maxNameLen = 200
)

// decodeJSON reads one JSON object from the body into v, refusing unknown
// fields, wrong types, trailing data and oversized bodies with a 400 that says
// what is wrong.
func decodeJSON(c *fiber.Ctx, v any) error {
	body := c.Body()
	if len(body) > maxJSONBody {
		return badRequest(codeBodyTooLarge, "The request body is %d bytes; this endpoint accepts at most %d.", len(body), maxJSONBody)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest(codeEmptyBody, "The request body is empty; send a JSON object (see docs/API.md).")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest(codeInvalidJSON, "%s", describeJSONError(err))
	}
	if err := exactFields(body, v); err != nil {
		return badRequest(codeInvalidJSON, "%s; see docs/API.md for the fields this endpoint takes.", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest(codeInvalidJSON, "The body must hold exactly one JSON object, with nothing after it.")
	}
	return nil
}

// exactFields checks the names of a JSON object's members against the json
// names of the struct v points to, exactly. encoding/json matches names
// without regard to case and keeps the last of two members with one name,
// so {"site": A, "Site": B} decoded as B while anything else reading the
// same bytes (a client's schema check, the agent's own transcript, a log)
// reads A. Run after a successful decode, so the text is one JSON object.
func exactFields(body []byte, v any) error {
	names := jsonNames(reflect.TypeOf(v))
	if names == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		k, _ := t.(string)
		switch {
		case seen[k]:
			return fmt.Errorf("field %q appears twice; send each field once", k)
		case !names[k]:
			return fmt.Errorf("field %q is not one this takes (field names are case-sensitive)", k)
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}

// jsonNames are the member names a struct type decodes from, or nil for a
// type that is not a struct (or a pointer to one).
func jsonNames(t reflect.Type) map[string]bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	names := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
			continue
		case name == "" && f.Anonymous:
			for k := range jsonNames(f.Type) {
				names[k] = true
			}
			continue
		case name == "":
			name = f.Name
		}
		names[name] = true
	}
	return names
}

func describeJSONError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("The body is not valid JSON (at byte %d: %s).", syn.Offset, syn.Error())
	case errors.As(err, &typ):
		if typ.Field == "" {
			return fmt.Sprintf("The body must be a JSON object, not %s.", typ.Value)
		}
		return fmt.Sprintf("Field %q must be %s, not %s.", typ.Field, jsonKind(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "The body ends in the middle of a JSON value."
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return fmt.Sprintf("Unknown field %s; see docs/API.md for the fields this endpoint takes.", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return "The body is not valid JSON: " + err.Error()
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "int", "int64", "int32", "uint", "uint64", "float64":
		return "a number"
	case "slice":
		return "an array"
	}
	return "an object"
}

func badRequest(code, format string, args ...any) *apiError {
	return errorf(http.StatusBadRequest, code, format, args...)
}

// cleanName checks a required name or title: trimmed, 1..maxNameLen
// characters, valid UTF-8, no control characters.
func cleanName(field, v string) (string, error) {
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		return "", badRequest(codeInvalidField, "Field %q is required and must not be blank.", field)
	case !utf8.ValidString(v):
		return "", badRequest(codeInvalidField, "Field %q must be valid UTF-8.", field)
	case utf8.RuneCountInString(v) > maxNameLen:
		return "", badRequest(codeInvalidField, "Field %q is %d characters; at most %d are allowed.", field, utf8.RuneCountInString(v), maxNameLen)
	case strings.IndexFunc(v, unicode.IsControl) >= 0:
		return "", badRequest(codeInvalidField, "Field %q must not contain control characters.", field)
	}
	return v, nil
}

// nameBody is the body of every endpoint that takes only a name.
type nameBody struct {
	Name string `json:"name"`
}

// decodeName reads a {"name": …} body and checks the name.
func decodeName(c *fiber.Ctx) (string, error) {
	var in nameBody
	if err := decodeJSON(c, &in); err != nil {
		return "", err
	}
	return cleanName("name", in.Name)
}
