/* json_schema: JSON Schema -> GBNF with llama.cpp's json_schema_to_grammar semantics (the same
 * rules, rule names and text for the schemas it converts). The public side is
 * trit_json_schema_to_grammar in trit.h. */
#ifndef TRIT_JSON_SCHEMA_H
#define TRIT_JSON_SCHEMA_H

#include <jansson.h>
#include <stddef.h>

/* The grammar of a schema already read as JSON (any value: a non-object is refused as llama.cpp
 * refuses it). Returns malloc'd GBNF text, or NULL with one line in err. */
char *json_schema_grammar(json_t *schema, char *err, size_t errlen);

#endif
