/* Keeps the support library non-empty while it has no source of its own. */
typedef int pp_empty_translation_unit;
