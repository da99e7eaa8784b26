package sitetools

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/xeipuuv/gojsonreference"
	"github.com/xeipuuv/gojsonschema"
)

// SchemaCacheBytes bounds the schemas kept compiled, counted by the size of their source. Pages
// re-announce their tools on every load, so without a cache each page view would recompile every
// schema; without a bound, many pages could fill memory. 16 MiB holds thousands of typical
// schemas.
const SchemaCacheBytes = 16 << 20

// Schema is a page's input schema, translated to draft 7 and compiled once. It is safe for
// concurrent use.
type Schema struct {
	compiled   *gojsonschema.Schema
	translated any  // the draft-7 document gojsonschema compiled, kept for tests and debugging
	cost       cost // what checking costs per value at each depth (see MaxValidationCost)
}

// CompileSchema translates and compiles a page's input schema, or refuses it with a *Refusal of
// kind ErrUnsupportedSchema whose reason says what to change. It never fetches anything and never
// accepts a schema that gojsonschema would check differently from what the page declared.
// Results, refusals included, are cached by a hash of raw.
func CompileSchema(raw json.RawMessage) (*Schema, error) {
	return schemas.get(raw)
}

func compileSchema(raw json.RawMessage) (*Schema, error) {
	if len(raw) > MaxDescriptorBytes {
		return nil, schemaRefusal("", fmt.Sprintf("is %d bytes; the limit is %d", len(raw), MaxDescriptorBytes))
	}
	root, err := decodeSchema(raw)
	if err != nil {
		return nil, err
	}
	d, err := rootDialect(root)
	if err != nil {
		return nil, err
	}
	t := newTranslator(d)
	doc, err := t.translate(root)
	if err != nil {
		return nil, err
	}
	c, err := checkBound(doc, t.nodes)
	if err != nil {
		return nil, err
	}
	s, err := compileDraft(doc, d)
	if err != nil {
		return nil, err
	}
	s.cost = c
	return s, nil
}

// decodeSchema decodes with json.Number, as gojsonschema needs, and insists on an object that
// lets arguments be an object: tool arguments always are one.
func decodeSchema(raw json.RawMessage) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, schemaRefusal("", "is not valid JSON")
	}
	root, ok := v.(map[string]any)
	if !ok {
		return nil, schemaRefusal("", fmt.Sprintf("is a JSON %s; it must be a JSON Schema object", goKind(v)))
	}
	if !allowsObject(root["type"]) {
		return nil, schemaRefusal("", "does not allow an object, but tool arguments are always a JSON object; use \"type\": \"object\"")
	}
	return root, nil
}

func allowsObject(typ any) bool {
	switch t := typ.(type) {
	case nil:
		return true
	case string:
		return t == "object"
	case []any:
		for _, v := range t {
			if v == "object" {
				return true
			}
		}
	}
	return false
}

func rootDialect(root map[string]any) (dialect, error) {
	v, ok := root["$schema"]
	if !ok {
		return dialectUnspecified, nil
	}
	return parseDialect(v)
}

// compileDraft hands the translated document to gojsonschema with the draft fixed, so that
// gojsonschema reads no "$schema" and guesses nothing.
func compileDraft(doc any, d dialect) (*Schema, error) {
	loader := gojsonschema.NewSchemaLoader()
	loader.AutoDetect = false
	loader.Draft = gojsonschema.Draft7
	switch d {
	case dialectDraft4:
		loader.Draft = gojsonschema.Draft4
	case dialectDraft6:
		loader.Draft = gojsonschema.Draft6
	}
	compiled, err := loader.Compile(document{doc})
	if err != nil {
		return nil, schemaRefusal("", "is not a valid JSON Schema: "+err.Error())
	}
	return &Schema{compiled: compiled, translated: doc}, nil
}

// document is a gojsonschema loader for a value already decoded with json.Number. Its loader
// factory refuses every reference it is asked to load, so no schema or argument can make
// gojsonschema open a file or a URL, whatever the translator let through.
type document struct{ value any }

// errNoFetch is what gojsonschema gets if it ever tries to load a referenced document.
var errNoFetch = errors.New("sitetools: schemas are never fetched")

func (d document) JsonSource() any                               { return d.value }
func (d document) LoadJSON() (any, error)                        { return d.value, nil }
func (d document) LoaderFactory() gojsonschema.JSONLoaderFactory { return noFetch{} }

func (d document) JsonReference() (gojsonreference.JsonReference, error) {
	return gojsonreference.NewJsonReference("#")
}

type noFetch struct{}

func (noFetch) New(source string) gojsonschema.JSONLoader { return refusedDocument{} }

type refusedDocument struct{ document }

func (refusedDocument) LoadJSON() (any, error) { return nil, errNoFetch }

// schemaCache remembers compiled schemas and refusals by a hash of the raw schema, least
// recently used first out. Two callers compiling the same new schema at once both compile it;
// that costs a little work and keeps the lock out of compilation.
type schemaCache struct {
	limit int // bytes of source; static

	mu      sync.Mutex
	size    int                        // guarded by mu
	order   *list.List                 // of *cacheEntry, most recent first; guarded by mu
	entries map[[32]byte]*list.Element // guarded by mu
}

type cacheEntry struct {
	key    [32]byte
	size   int
	schema *Schema
	err    error
}

var schemas = newSchemaCache(SchemaCacheBytes)

func newSchemaCache(limit int) *schemaCache {
	return &schemaCache{limit: limit, order: list.New(), entries: map[[32]byte]*list.Element{}}
}

func (c *schemaCache) get(raw json.RawMessage) (*Schema, error) {
	if len(raw) > MaxDescriptorBytes {
		return compileSchema(raw) // refused without a trace in the cache
	}
	key := sha256.Sum256(raw)
	if e, ok := c.lookup(key); ok {
		return e.schema, e.err
	}
	s, err := compileSchema(raw)
	c.store(&cacheEntry{key: key, size: len(raw), schema: s, err: err})
	return s, err
}

func (c *schemaCache) lookup(key [32]byte) (*cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheEntry), true
}

func (c *schemaCache) store(e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[e.key]; ok {
		return
	}
	c.entries[e.key] = c.order.PushFront(e)
	c.size += e.size
	for c.size > c.limit && c.order.Len() > 1 {
		old := c.order.Remove(c.order.Back()).(*cacheEntry)
		delete(c.entries, old.key)
		c.size -= old.size
	}
}

func (c *schemaCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
