//! The schema model the documents are rendered from: just the parts of OpenAPI that warrant's
//! types need, so that v2 and v3 come from one description and cannot drift apart.

use serde_json::{Map, Value, json};

/// The extension that ties a definition (or an operation) to the kinds it describes. kubectl
/// finds a manifest's schema through it.
pub(crate) const GVK_EXTENSION: &str = "x-kubernetes-group-version-kind";

/// A group, version and kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gvk {
    /// The API group; empty for the core group.
    pub(crate) group: &'static str,
    /// The version.
    pub(crate) version: &'static str,
    /// The kind.
    pub(crate) kind: &'static str,
}

pub(crate) use warrant_server::tooling::{AUTHENTICATION_V1, GroupVersion, WARRANT_V1ALPHA1};

/// What the documents say of a group-version beyond the route table's fields.
pub(crate) trait GroupVersionExt {
    /// Where its URLs start, and how `/openapi/v3` names it: `api/v1`, `apis/<group>/<version>`.
    fn path(self) -> String;
    /// A kind in this group-version.
    fn kind(self, kind: &'static str) -> Gvk;
}

impl GroupVersionExt for GroupVersion {
    fn path(self) -> String {
        if self.group.is_empty() {
            format!("api/{}", self.version)
        } else {
            format!("apis/{}/{}", self.group, self.version)
        }
    }

    fn kind(self, kind: &'static str) -> Gvk {
        Gvk {
            group: self.group,
            version: self.version,
            kind,
        }
    }
}

impl Gvk {
    /// As the extension writes it.
    pub(crate) fn to_json(self) -> Value {
        json!({"group": self.group, "kind": self.kind, "version": self.version})
    }
}

/// The OpenAPI version being written: they keep definitions in different places and write a
/// described reference differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// Swagger 2.0, `/openapi/v2`.
    V2,
    /// OpenAPI 3.0, `/openapi/v3/...`.
    V3,
}

impl Dialect {
    /// The `$ref` to a named definition.
    pub(crate) fn reference(self, name: &str) -> String {
        match self {
            Dialect::V2 => format!("#/definitions/{name}"),
            Dialect::V3 => format!("#/components/schemas/{name}"),
        }
    }
}

/// A schema.
#[derive(Debug, Clone)]
pub(crate) enum Schema {
    /// A string.
    Str,
    /// An RFC 3339 timestamp.
    DateTime,
    /// A 64-bit integer.
    Int64,
    /// A boolean.
    Bool,
    /// A list.
    Array(Box<Schema>),
    /// An object with arbitrary keys and values of one schema.
    Map(Box<Schema>),
    /// Any object at all.
    FreeForm,
    /// Another definition, by name.
    Ref(&'static str),
    /// An object with known fields; any other field is unknown (kubectl rejects it).
    Object {
        /// The fields, in the order they are documented.
        fields: Vec<Field>,
        /// The fields that must be present.
        required: &'static [&'static str],
    },
}

/// A field of an object.
#[derive(Debug, Clone)]
pub(crate) struct Field {
    /// The JSON name.
    pub(crate) name: &'static str,
    /// What it means, for `kubectl explain`.
    pub(crate) description: &'static str,
    /// Its schema.
    pub(crate) schema: Schema,
}

/// A field.
pub(crate) fn field(name: &'static str, description: &'static str, schema: Schema) -> Field {
    Field {
        name,
        description,
        schema,
    }
}

/// A list of strings.
pub(crate) fn strings() -> Schema {
    Schema::Array(Box::new(Schema::Str))
}

/// A named, reusable schema: `definitions` in v2, `components.schemas` in v3.
#[derive(Debug, Clone)]
pub(crate) struct Definition {
    /// Its name; Kubernetes' own where the type is Kubernetes' own, so kubectl's messages
    /// name the same types they name against kube-apiserver.
    pub(crate) name: &'static str,
    /// What it is.
    pub(crate) description: &'static str,
    /// Its schema.
    pub(crate) schema: Schema,
    /// The kinds it is the body of, if it is a top-level object.
    pub(crate) kinds: Vec<Gvk>,
}

impl Schema {
    /// The schema as `dialect` writes it, with `description` if there is one.
    pub(crate) fn render(&self, dialect: Dialect, description: Option<&str>) -> Value {
        let value = match self {
            Schema::Str => json!({"type": "string"}),
            Schema::DateTime => json!({"type": "string", "format": "date-time"}),
            Schema::Int64 => json!({"type": "integer", "format": "int64"}),
            Schema::Bool => json!({"type": "boolean"}),
            Schema::Array(items) => json!({"type": "array", "items": items.render(dialect, None)}),
            Schema::Map(values) => {
                json!({"type": "object", "additionalProperties": values.render(dialect, None)})
            }
            Schema::FreeForm => json!({"type": "object"}),
            Schema::Ref(name) => {
                let reference = json!({"$ref": dialect.reference(name)});
                match (dialect, description) {
                    // A v3 reference ignores its siblings, so a described one is wrapped, as
                    // kube-apiserver writes it.
                    (Dialect::V3, Some(_)) => json!({"allOf": [reference]}),
                    _ => reference,
                }
            }
            Schema::Object { fields, required } => {
                let properties: Map<String, Value> = fields
                    .iter()
                    .map(|f| {
                        (
                            f.name.to_owned(),
                            f.schema.render(dialect, Some(f.description)),
                        )
                    })
                    .collect();
                let mut object = json!({"type": "object", "properties": properties});
                if let (false, Value::Object(map)) = (required.is_empty(), &mut object) {
                    map.insert("required".into(), json!(required));
                }
                object
            }
        };
        with_description(value, description)
    }

    /// The definitions this schema refers to directly.
    pub(crate) fn references(&self, into: &mut Vec<&'static str>) {
        match self {
            Schema::Ref(name) => into.push(name),
            Schema::Array(inner) | Schema::Map(inner) => inner.references(into),
            Schema::Object { fields, .. } => {
                for f in fields {
                    f.schema.references(into);
                }
            }
            Schema::Str | Schema::DateTime | Schema::Int64 | Schema::Bool | Schema::FreeForm => {}
        }
    }
}

fn with_description(mut value: Value, description: Option<&str>) -> Value {
    if let (Some(text), Value::Object(map)) = (description, &mut value) {
        map.insert("description".into(), text.into());
    }
    value
}

impl Definition {
    /// The definition as `dialect` writes it, listing only the kinds `claim` accepts.
    pub(crate) fn render(&self, dialect: Dialect, claim: impl Fn(&Gvk) -> bool) -> Value {
        let mut value = self.schema.render(dialect, Some(self.description));
        let kinds: Vec<Value> = self
            .kinds
            .iter()
            .filter(|k| claim(k))
            .map(|k| k.to_json())
            .collect();
        if let (false, Value::Object(map)) = (kinds.is_empty(), &mut value) {
            map.insert(GVK_EXTENSION.into(), Value::Array(kinds));
        }
        value
    }
}

/// The definitions `roots` need, themselves included, in name order. Names with no
/// definition are left out (the catalogue's tests make sure there are none).
pub(crate) fn closure<'a>(
    catalogue: &'a [Definition],
    roots: impl IntoIterator<Item = &'static str>,
) -> Vec<&'a Definition> {
    let mut wanted: Vec<&'static str> = roots.into_iter().collect();
    let mut found: Vec<&'a Definition> = Vec::new();
    while let Some(name) = wanted.pop() {
        if found.iter().any(|d| d.name == name) {
            continue;
        }
        if let Some(definition) = catalogue.iter().find(|d| d.name == name) {
            definition.schema.references(&mut wanted);
            found.push(definition);
        }
    }
    found.sort_by_key(|d| d.name);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_versions_name_their_documents() {
        assert_eq!(warrant_server::tooling::CORE_V1.path(), "api/v1");
        assert_eq!(WARRANT_V1ALPHA1.path(), "apis/warrant.dev/v1alpha1");
    }

    #[test]
    fn references_are_written_per_dialect() {
        let meta = Schema::Ref("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");
        assert_eq!(
            meta.render(Dialect::V2, Some("about")),
            json!({"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "description": "about"})
        );
        assert_eq!(
            meta.render(Dialect::V3, Some("about")),
            json!({"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}], "description": "about"})
        );
        assert_eq!(
            meta.render(Dialect::V3, None),
            json!({"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"})
        );
    }

    #[test]
    fn objects_list_properties_and_required_fields() {
        let schema = Schema::Object {
            fields: vec![
                field("token", "the token", Schema::Str),
                field("audiences", "who", strings()),
                field("extra", "more", Schema::Map(Box::new(strings()))),
            ],
            required: &["token"],
        };
        assert_eq!(
            schema.render(Dialect::V2, None),
            json!({
                "type": "object",
                "properties": {
                    "token": {"type": "string", "description": "the token"},
                    "audiences": {"type": "array", "items": {"type": "string"}, "description": "who"},
                    "extra": {
                        "type": "object",
                        "additionalProperties": {"type": "array", "items": {"type": "string"}},
                        "description": "more",
                    },
                },
                "required": ["token"],
            })
        );
    }

    #[test]
    fn closure_follows_references() {
        let catalogue = vec![
            Definition {
                name: "a",
                description: "",
                schema: Schema::Object {
                    fields: vec![field("b", "", Schema::Array(Box::new(Schema::Ref("b"))))],
                    required: &[],
                },
                kinds: vec![],
            },
            Definition {
                name: "b",
                description: "",
                schema: Schema::Ref("c"),
                kinds: vec![],
            },
            Definition {
                name: "c",
                description: "",
                schema: Schema::Str,
                kinds: vec![],
            },
            Definition {
                name: "unused",
                description: "",
                schema: Schema::Str,
                kinds: vec![],
            },
        ];
        let names: Vec<&str> = closure(&catalogue, ["a"]).iter().map(|d| d.name).collect();
        assert_eq!(names, ["a", "b", "c"]);
    }
}
