// The patch dialect of credential forms, merged exactly as the Python `merge_patch` does
// (scratchpad/vault/forms.py; both are tested against tests/data/form_patch_vectors.json):
// top-level keys overwrite (null deletes); `fields` and `methods` (and a method's `fields`)
// given as objects are keyed by name / id: an object merges into that entry, null removes
// it, an unknown key appends one. A patch with another `form_id` replaces the form.
// Neither input is ever changed.

const METHOD_KEYED = { fields: ["name", {}] };
const FORM_KEYED = { fields: ["name", {}], methods: ["id", METHOD_KEYED] };

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function has(object, key) {
  return Object.prototype.hasOwnProperty.call(object, key);
}

/** A deep copy of plain JSON data. */
export function clone(value) {
  if (Array.isArray(value)) return value.map(clone);
  if (!isObject(value)) return value;
  const copy = {};
  for (const key of Object.keys(value)) put(copy, key, clone(value[key]));
  return copy;
}

/** Set an own property, even one named `__proto__` (never the object's prototype). */
function put(object, key, value) {
  Object.defineProperty(object, key, {
    value,
    enumerable: true,
    writable: true,
    configurable: true,
  });
}

/** The form as `patch` leaves it: a new object; both inputs untouched. */
export function mergePatch(form, patch) {
  if (!isObject(form) || !isObject(patch)) {
    throw new TypeError("mergePatch takes a form and a patch, both JSON objects");
  }
  const current = has(form, "form_id") ? form.form_id : null;
  const wanted = has(patch, "form_id") ? patch.form_id : current;
  return mergeObject(wanted === current ? clone(form) : {}, patch, FORM_KEYED, "");
}

function mergeObject(base, change, keyed, path) {
  for (const key of Object.keys(change)) {
    const value = change[key];
    if (value === null) delete base[key];
    else if (has(keyed, key) && isObject(value)) {
      put(base, key, mergeList(base[key], value, keyed[key], `${path}${key}`));
    } else put(base, key, clone(value));
  }
  return base;
}

function mergeList(items, change, [idKey, inner], path) {
  const result = Array.isArray(items) ? clone(items) : [];
  for (const key of Object.keys(change)) {
    const entry = change[key];
    const index = result.findIndex((item) => isObject(item) && item[idKey] === key);
    if (entry === null) {
      if (index >= 0) result.splice(index, 1);
      continue;
    }
    if (!isObject(entry)) {
      throw new TypeError(`${path}.${key}: expected an object or null; check the patch`);
    }
    const start = index < 0 ? { [idKey]: key } : result[index];
    const merged = mergeObject(start, entry, inner, "");
    merged[idKey] = key;
    if (index < 0) result.push(merged);
    else result[index] = merged;
  }
  return result;
}
