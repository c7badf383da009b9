/* jinja parser: recursive descent from the tokens to the syntax tree (struct node), with Jinja's
 * operator precedence. Nesting is bounded by MAX_DEPTH, so a deep template is an error, never a
 * stack overflow in the parser or the evaluator. */
#include "text/jinja/jinja_int.h"

#include <string.h>

/* ---- parser ---- */
static tok *peek(J *j) { return &j->toks[j->pos]; }
static tok *next(J *j) { return j->pos + 1 < j->ntok ? &j->toks[j->pos++] : &j->toks[j->pos]; }

static int is_op(J *j, const char *op) {
    tok *t = peek(j);
    return t->k == T_OP && str_eq(t->s, op);
}
static int is_name(J *j, const char *nm) {
    tok *t = peek(j);
    return t->k == T_NAME && str_eq(t->s, nm);
}

static int accept_op(J *j, const char *op) {
    if (!is_op(j, op)) return 0;
    next(j);
    return 1;
}

static int accept_name(J *j, const char *nm) {
    if (!is_name(j, nm)) return 0;
    next(j);
    return 1;
}

static const char *tok_desc(tok *t) {
    static const char *names[] = {"text",     "'{{'",     "'}}'",     "'{%'",        "'%}'",   "a name",
                                  "a string", "a number", "a number", "an operator", "the end"};
    return names[t->k];
}

static void expect_op(J *j, const char *op) {
    if (!accept_op(j, op))
        jinja_die(j, JINJA_UNSUPPORTED, peek(j)->line, "expected '%s', found %s", op, tok_desc(peek(j)));
}

static str expect_name(J *j) {
    tok *t = peek(j);
    if (t->k != T_NAME) jinja_die(j, JINJA_UNSUPPORTED, t->line, "expected a name, found %s", tok_desc(t));
    next(j);
    return t->s;
}

static node *mknode(J *j, int k, int line) {
    node *n = jinja_alloc(j, sizeof *n);
    memset(n, 0, sizeof *n);
    n->k = k, n->line = line;
    return n;
}

static void enter(J *j) {
    if (++j->depth > MAX_DEPTH) jinja_die(j, JINJA_LIMIT, peek(j)->line, "nested more than %d levels deep", MAX_DEPTH);
}

static node *parse_expr(J *j);
static node *parse_or(J *j);
static node *parse_unary(J *j, int with_filter);

/* Call arguments up to ')': positional, then name=value. */
static node *parse_args(J *j) {
    node *head = NULL, **tail = &head;
    int kw_seen = 0;
    while (!accept_op(j, ")")) {
        if (head) expect_op(j, ",");
        if (accept_op(j, ")")) break;
        str kw = {0};
        if (peek(j)->k == T_NAME && j->toks[j->pos + 1].k == T_OP && str_eq(j->toks[j->pos + 1].s, "=")) {
            kw = expect_name(j);
            next(j);
            kw_seen = 1;
        } else if (kw_seen) {
            jinja_die(j, JINJA_UNSUPPORTED, peek(j)->line, "positional argument after a keyword argument");
        }
        node *a = parse_expr(j);
        a->kw = kw;
        *tail = a, tail = &a->next;
    }
    return head;
}

static node *parse_primary(J *j) {
    tok *t = next(j);
    node *n = mknode(j, E_LIT, t->line);
    switch (t->k) {
    case T_NAME:
        if (str_eq(t->s, "true") || str_eq(t->s, "True")) n->v = vbool(1);
        else if (str_eq(t->s, "false") || str_eq(t->s, "False")) n->v = vbool(0);
        else if (str_eq(t->s, "none") || str_eq(t->s, "None")) n->v = vnone();
        else n->k = E_NAME, n->s = t->s;
        return n;
    case T_STR: {
        sbuf b = {0};
        jinja_sb_put(j, &b, t->s.p, t->s.n);
        while (peek(j)->k == T_STR) jinja_sb_put(j, &b, peek(j)->s.p, peek(j)->s.n), next(j);
        n->v = vstr(sb_str(&b));
        return n;
    }
    case T_INT: n->v = vint(t->i); return n;
    case T_FLOAT: n->v = (val){.k = V_FLOAT, .u.f = t->f}; return n;
    case T_OP:
        if (str_eq(t->s, "(")) {
            if (accept_op(j, ")")) return n->k = E_LIST, n->neg = 1, n; /* () */
            node *first = parse_expr(j);
            if (accept_op(j, ")")) return first;
            n->k = E_LIST, n->neg = 1, n->args = first; /* a tuple: a list marked with neg */
            for (node **tail = &first->next; !accept_op(j, ")"); tail = &(*tail)->next) {
                expect_op(j, ",");
                if (accept_op(j, ")")) break;
                *tail = parse_expr(j);
            }
            return n;
        }
        if (str_eq(t->s, "[") || str_eq(t->s, "{")) {
            int dict = t->s.p[0] == '{';
            const char *close = dict ? "}" : "]";
            node **tail = &n->args;
            n->k = dict ? E_DICT : E_LIST;
            while (!accept_op(j, close)) {
                if (n->args) expect_op(j, ",");
                if (accept_op(j, close)) break;
                node *item = parse_expr(j);
                *tail = item, tail = &item->next;
                if (dict) {
                    expect_op(j, ":");
                    item = parse_expr(j);
                    *tail = item, tail = &item->next;
                }
            }
            return n;
        }
        break;
    default: break;
    }
    jinja_die(j, JINJA_UNSUPPORTED, t->line, "unexpected %s in an expression", tok_desc(t));
}

/* x[i] or x[a:b:c]; absent slice parts are NULL. */
static node *parse_subscript(J *j, node *obj, int line) {
    node *parts[3] = {0};
    int colons = 0;
    for (;;) {
        if (is_op(j, ":")) {
            if (++colons > 2) jinja_die(j, JINJA_UNSUPPORTED, line, "bad slice");
            next(j);
        } else if (is_op(j, "]")) {
            next(j);
            break;
        } else {
            if (parts[colons]) jinja_die(j, JINJA_UNSUPPORTED, line, "bad subscript");
            parts[colons] = parse_expr(j);
        }
    }
    node *n = mknode(j, colons ? E_SLICE : E_INDEX, line);
    if (!colons && !parts[0]) jinja_die(j, JINJA_UNSUPPORTED, line, "empty subscript");
    n->a = obj, n->b = parts[0], n->c = parts[1];
    n->alt = parts[2];
    return n;
}

static node *parse_postfix(J *j, node *n) {
    for (int d0 = j->depth;; enter(j)) {
        int line = peek(j)->line;
        if (accept_op(j, ".")) {
            node *a = mknode(j, E_ATTR, line);
            a->a = n, a->s = expect_name(j);
            n = a;
        } else if (accept_op(j, "[")) {
            n = parse_subscript(j, n, line);
        } else if (accept_op(j, "(")) {
            node *c = mknode(j, E_CALL, line);
            c->a = n, c->args = parse_args(j);
            n = c;
        } else {
            j->depth = d0;
            return n;
        }
    }
}

/* `| filter(args)` and `is [not] test(args)` after a value. */
static node *parse_filters(J *j, node *n) {
    for (int d0 = j->depth;; enter(j)) {
        int line = peek(j)->line;
        if (accept_op(j, "|")) {
            node *f = mknode(j, E_FILTER, line);
            f->a = n, f->s = expect_name(j);
            if (accept_op(j, "(")) f->args = parse_args(j);
            n = f;
        } else if (accept_name(j, "is")) {
            node *t = mknode(j, E_TEST, line);
            t->neg = accept_name(j, "not");
            t->a = n, t->s = expect_name(j);
            if (accept_op(j, "(")) t->args = parse_args(j);
            n = t;
        } else if (accept_op(j, "(")) {
            node *c = mknode(j, E_CALL, line);
            c->a = n, c->args = parse_args(j);
            n = c;
        } else {
            j->depth = d0;
            return n;
        }
    }
}

static node *parse_unary(J *j, int with_filter) {
    enter(j);
    int line = peek(j)->line;
    node *n;
    if (accept_op(j, "-")) {
        n = mknode(j, E_NEG, line);
        n->a = parse_unary(j, 0);
    } else if (accept_op(j, "+")) {
        n = parse_unary(j, 0);
    } else {
        n = parse_postfix(j, parse_primary(j));
    }
    if (with_filter) n = parse_filters(j, n);
    j->depth--;
    return n;
}

/* Left-deep chains count as nesting: evaluation recurses through them. */
static node *binary(J *j, node *a, const char *op, node *b, int line) {
    enter(j);
    node *n = mknode(j, E_BIN, line);
    n->a = a, n->b = b, n->s = (str){op, strlen(op)};
    return n;
}

/* One left-associative level of binary operators over operands of the next level. */
static node *parse_level(J *j, node *(*operand)(J *), const char *const *ops, int n_ops) {
    int d0 = j->depth;
    node *n = operand(j);
    for (;;) {
        int hit = -1;
        for (int k = 0; k < n_ops; k++)
            if (is_op(j, ops[k])) hit = k;
        if (hit < 0) return j->depth = d0, n;
        int line = next(j)->line;
        n = binary(j, n, ops[hit], operand(j), line);
    }
}

static node *parse_filtered(J *j) { return parse_unary(j, 1); }

static node *parse_math2(J *j) {
    static const char *const ops[] = {"*", "/", "//", "%"};
    return parse_level(j, parse_filtered, ops, 4);
}

static node *parse_concat(J *j) {
    static const char *const ops[] = {"~"};
    return parse_level(j, parse_math2, ops, 1);
}

static node *parse_math1(J *j) {
    static const char *const ops[] = {"+", "-"};
    return parse_level(j, parse_concat, ops, 2);
}

/* Comparison chains a < b < c; operands in args, operators in each operand's s (from the 2nd). */
static node *parse_compare(J *j) {
    static const char *ops[] = {"==", "!=", "<", ">", "<=", ">="};
    node *first = parse_math1(j), *n = NULL, **tail = NULL;
    for (;;) {
        const char *op = NULL;
        for (int k = 0; k < 6; k++)
            if (is_op(j, ops[k])) op = ops[k];
        int line = peek(j)->line;
        if (op) next(j);
        else if (accept_name(j, "in")) op = "in";
        else if (is_name(j, "not") && j->toks[j->pos + 1].k == T_NAME && str_eq(j->toks[j->pos + 1].s, "in"))
            next(j), next(j), op = "not in";
        else return n ? n : first;
        if (!n) {
            n = mknode(j, E_CMP, line);
            n->args = first, tail = &first->next;
        }
        node *operand = parse_math1(j);
        node *holder = mknode(j, E_PARAM, line);
        holder->s = (str){op, strlen(op)}, holder->a = operand;
        *tail = holder, tail = &holder->next;
    }
}

static node *parse_not(J *j) {
    if (is_name(j, "not")) {
        int line = next(j)->line;
        enter(j);
        node *n = mknode(j, E_NOT, line);
        n->a = parse_not(j);
        j->depth--;
        return n;
    }
    return parse_compare(j);
}

/* `and` / `or` chains: left-deep nodes of kind, operands of the next level. */
static node *parse_logic(J *j, const char *word, int kind, node *(*operand)(J *)) {
    int d0 = j->depth;
    node *n = operand(j);
    while (is_name(j, word)) {
        node *a = mknode(j, kind, next(j)->line);
        a->a = n, a->b = operand(j);
        n = a;
        enter(j);
    }
    j->depth = d0;
    return n;
}

static node *parse_and(J *j) { return parse_logic(j, "and", E_AND, parse_not); }
static node *parse_or(J *j) { return parse_logic(j, "or", E_OR, parse_and); }

static node *parse_expr(J *j) {
    int d0 = j->depth;
    enter(j);
    node *n = parse_or(j);
    while (is_name(j, "if")) {
        node *c = mknode(j, E_COND, next(j)->line);
        c->b = parse_or(j);
        c->a = n;
        if (accept_name(j, "else")) c->c = parse_expr(j);
        n = c;
        enter(j);
    }
    j->depth = d0;
    return n;
}

static void expect_close(J *j) {
    tok *t = peek(j);
    if (t->k != T_BLK_CLOSE) jinja_die(j, JINJA_UNSUPPORTED, t->line, "expected '%%}', found %s", tok_desc(t));
    next(j);
}

static node *parse_body(J *j, const char *const *ends, str *which);

static node *parse_if(J *j, int line) {
    node *n = mknode(j, N_IF, line);
    n->a = parse_expr(j);
    expect_close(j);
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    str end;
    n->body = parse_body(j, ends, &end);
    if (str_eq(end, "elif")) { /* an elif chain nests like the ifs it stands for */
        enter(j);
        n->alt = parse_if(j, peek(j)->line);
        j->depth--;
        return n;
    }
    if (str_eq(end, "else")) {
        static const char *const ends2[] = {"endif", NULL};
        expect_close(j);
        n->alt = parse_body(j, ends2, &end);
    }
    expect_close(j);
    return n;
}

static node *parse_for(J *j, int line) {
    node *n = mknode(j, N_FOR, line);
    do {
        if (n->ntargets == MAX_TARGETS) jinja_die(j, JINJA_UNSUPPORTED, line, "too many loop variables");
        n->targets[n->ntargets++] = expect_name(j);
    } while (accept_op(j, ","));
    if (!accept_name(j, "in")) jinja_die(j, JINJA_UNSUPPORTED, line, "expected 'in' in a for loop");
    n->a = parse_or(j);
    if (accept_name(j, "if")) n->b = parse_or(j);
    if (is_name(j, "recursive")) jinja_die(j, JINJA_UNSUPPORTED, line, "recursive loops are not supported");
    expect_close(j);
    static const char *const ends[] = {"else", "endfor", NULL};
    str end;
    n->body = parse_body(j, ends, &end);
    if (str_eq(end, "else")) {
        static const char *const ends2[] = {"endfor", NULL};
        expect_close(j);
        n->alt = parse_body(j, ends2, &end);
    }
    expect_close(j);
    return n;
}

static node *parse_set(J *j, int line) {
    str name = expect_name(j);
    node *n = mknode(j, N_SET, line);
    n->s = name;
    if (accept_op(j, ".")) {
        n->k = N_SETATTR;
        n->kw = expect_name(j);
    }
    if (is_op(j, ",")) jinja_die(j, JINJA_UNSUPPORTED, line, "tuple assignment is not supported");
    if (n->k == N_SET && peek(j)->k == T_BLK_CLOSE) { /* {% set x %}...{% endset %}: x is the body's output */
        static const char *const ends[] = {"endset", NULL};
        str end;
        next(j);
        n->body = parse_body(j, ends, &end);
        expect_close(j);
        return n;
    }
    expect_op(j, "=");
    n->a = parse_expr(j);
    expect_close(j);
    return n;
}

static node *parse_macro(J *j, int line) {
    node *n = mknode(j, N_MACRO, line);
    n->s = expect_name(j);
    expect_op(j, "(");
    node **tail = &n->args;
    while (!accept_op(j, ")")) {
        if (n->args) expect_op(j, ",");
        node *p = mknode(j, E_PARAM, peek(j)->line);
        p->s = expect_name(j);
        if (accept_op(j, "=")) p->a = parse_expr(j);
        *tail = p, tail = &p->next;
    }
    expect_close(j);
    static const char *const ends[] = {"endmacro", NULL};
    str end;
    n->body = parse_body(j, ends, &end);
    if (peek(j)->k == T_NAME) next(j); /* {% endmacro name %} */
    expect_close(j);
    return n;
}

static node *parse_statement(J *j) {
    int line = peek(j)->line;
    str kw = expect_name(j);
    if (str_eq(kw, "if")) return parse_if(j, line);
    if (str_eq(kw, "for")) return parse_for(j, line);
    if (str_eq(kw, "set")) return parse_set(j, line);
    if (str_eq(kw, "macro")) return parse_macro(j, line);
    if (str_eq(kw, "break") || str_eq(kw, "continue")) {
        expect_close(j);
        return mknode(j, kw.p[0] == 'b' ? N_BREAK : N_CONTINUE, line);
    }
    if (str_eq(kw, "filter")) { /* {% filter f | g(args) %}...{% endfilter %}: the body's output filtered */
        static const char *const ends[] = {"endfilter", NULL};
        node *n = mknode(j, N_FILTER, line), *chain = NULL;
        str end;
        int links = 0;
        do {
            if (++links > MAX_DEPTH) jinja_die(j, JINJA_LIMIT, line, "too many filters in one {%% filter %%}");
            node *f = mknode(j, E_FILTER, peek(j)->line);
            f->a = chain, f->s = expect_name(j);
            if (accept_op(j, "(")) f->args = parse_args(j);
            chain = f;
        } while (accept_op(j, "|"));
        expect_close(j);
        n->a = chain;
        n->body = parse_body(j, ends, &end);
        expect_close(j);
        return n;
    }
    if (str_eq(kw, "generation")) { /* Hugging Face's assistant-mask marker: renders its body */
        static const char *const ends[] = {"endgeneration", NULL};
        node *n = mknode(j, N_BLOCK, line);
        str end;
        expect_close(j);
        n->body = parse_body(j, ends, &end);
        expect_close(j);
        return n;
    }
    jinja_die(j, JINJA_UNSUPPORTED, line, "unsupported tag '%.*s'", (int)(kw.n > 40 ? 40 : kw.n), kw.p);
}

/* Statements up to one of ends (NULL: the end of the template); *which names the end tag,
 * whose '%}' is left for the caller. */
static node *parse_body(J *j, const char *const *ends, str *which) {
    enter(j);
    node *head = NULL, **tail = &head;
    for (;;) {
        tok *t = peek(j);
        node *n = NULL;
        if (t->k == T_EOF) {
            if (ends) {
                int last = 0;
                while (ends[last + 1]) last++;
                jinja_die(j, JINJA_UNSUPPORTED, t->line, "missing {%% %s %%}", ends[last]);
            }
            break;
        }
        next(j);
        if (t->k == T_TEXT) {
            n = mknode(j, N_TEXT, t->line);
            n->s = t->s;
        } else if (t->k == T_VAR_OPEN) {
            n = mknode(j, N_OUT, t->line);
            n->a = parse_expr(j);
            if (peek(j)->k != T_VAR_CLOSE)
                jinja_die(j, JINJA_UNSUPPORTED, peek(j)->line, "expected '}}', found %s", tok_desc(peek(j)));
            next(j);
        } else if (t->k == T_BLK_OPEN) {
            tok *kw = peek(j);
            for (int k = 0; ends && ends[k]; k++)
                if (kw->k == T_NAME && str_eq(kw->s, ends[k])) {
                    next(j);
                    *which = kw->s;
                    j->depth--;
                    return head;
                }
            n = parse_statement(j);
        } else {
            jinja_die(j, JINJA_UNSUPPORTED, t->line, "unexpected %s", tok_desc(t));
        }
        *tail = n, tail = &n->next;
    }
    j->depth--;
    return head;
}

/* The whole template: its statements up to the end. */
node *jinja_parse(J *j) { return parse_body(j, NULL, NULL); }
