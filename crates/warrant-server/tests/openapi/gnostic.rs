//! The protobuf form of `/openapi/v2`, which client-go (and so kubectl) asks for: gnostic's
//! `openapi.v2.Document`.
//!
//! Only the messages and fields the v2 document uses are declared. The field numbers are those
//! of gnostic's `openapiv2/OpenAPIv2.proto` (github.com/google/gnostic-models). Fields that are
//! a `oneof` there are plain optional fields here, which is the same on the wire. Extension
//! values (`x-…`) are carried as YAML text, as gnostic carries them; warrant writes them as
//! JSON, which is YAML.
//!
//! The message is made from the JSON document, as kube-apiserver makes its own, so the two
//! forms cannot disagree; anything in the JSON that is not declared here is an error rather
//! than a silent omission.

use prost::Message;
use serde_json::{Map, Value};

use warrant_server::ApiError;

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Document {
    #[prost(string, tag = "1")]
    pub(crate) swagger: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) info: Option<Info>,
    #[prost(message, optional, tag = "8")]
    pub(crate) paths: Option<Paths>,
    #[prost(message, optional, tag = "9")]
    pub(crate) definitions: Option<Definitions>,
    #[prost(message, repeated, tag = "16")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Info {
    #[prost(string, tag = "1")]
    pub(crate) title: String,
    #[prost(string, tag = "2")]
    pub(crate) version: String,
    #[prost(string, tag = "3")]
    pub(crate) description: String,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Paths {
    #[prost(message, repeated, tag = "1")]
    pub(crate) vendor_extension: Vec<NamedAny>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) path: Vec<NamedPathItem>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct NamedPathItem {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) value: Option<PathItem>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct PathItem {
    #[prost(message, optional, tag = "4")]
    pub(crate) post: Option<Operation>,
    #[prost(message, repeated, tag = "9")]
    pub(crate) parameters: Vec<ParametersItem>,
    #[prost(message, repeated, tag = "10")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Operation {
    #[prost(string, repeated, tag = "1")]
    pub(crate) tags: Vec<String>,
    #[prost(string, tag = "3")]
    pub(crate) description: String,
    #[prost(string, tag = "5")]
    pub(crate) operation_id: String,
    #[prost(string, repeated, tag = "6")]
    pub(crate) produces: Vec<String>,
    #[prost(string, repeated, tag = "7")]
    pub(crate) consumes: Vec<String>,
    #[prost(message, repeated, tag = "8")]
    pub(crate) parameters: Vec<ParametersItem>,
    #[prost(message, optional, tag = "9")]
    pub(crate) responses: Option<Responses>,
    #[prost(string, repeated, tag = "10")]
    pub(crate) schemes: Vec<String>,
    #[prost(message, repeated, tag = "13")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

/// `oneof { Parameter parameter = 1; JsonReference json_reference = 2; }`: only the first.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct ParametersItem {
    #[prost(message, optional, tag = "1")]
    pub(crate) parameter: Option<Parameter>,
}

/// `oneof { BodyParameter body_parameter = 1; NonBodyParameter non_body_parameter = 2; }`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Parameter {
    #[prost(message, optional, tag = "1")]
    pub(crate) body_parameter: Option<BodyParameter>,
    #[prost(message, optional, tag = "2")]
    pub(crate) non_body_parameter: Option<NonBodyParameter>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct BodyParameter {
    #[prost(string, tag = "1")]
    pub(crate) description: String,
    #[prost(string, tag = "2")]
    pub(crate) name: String,
    #[prost(string, tag = "3")]
    pub(crate) r#in: String,
    #[prost(bool, tag = "4")]
    pub(crate) required: bool,
    #[prost(message, optional, tag = "5")]
    pub(crate) schema: Option<Schema>,
}

/// `oneof { …; PathParameterSubSchema path_parameter_sub_schema = 4; }`: only path parameters.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct NonBodyParameter {
    #[prost(message, optional, tag = "4")]
    pub(crate) path_parameter_sub_schema: Option<PathParameterSubSchema>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct PathParameterSubSchema {
    #[prost(bool, tag = "1")]
    pub(crate) required: bool,
    #[prost(string, tag = "2")]
    pub(crate) r#in: String,
    #[prost(string, tag = "3")]
    pub(crate) description: String,
    #[prost(string, tag = "4")]
    pub(crate) name: String,
    #[prost(string, tag = "5")]
    pub(crate) r#type: String,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Responses {
    #[prost(message, repeated, tag = "1")]
    pub(crate) response_code: Vec<NamedResponseValue>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct NamedResponseValue {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) value: Option<ResponseValue>,
}

/// `oneof { Response response = 1; JsonReference json_reference = 2; }`: only the first.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct ResponseValue {
    #[prost(message, optional, tag = "1")]
    pub(crate) response: Option<Response>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Response {
    #[prost(string, tag = "1")]
    pub(crate) description: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) schema: Option<SchemaItem>,
}

/// `oneof { Schema schema = 1; FileSchema file_schema = 2; }`: only the first.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct SchemaItem {
    #[prost(message, optional, tag = "1")]
    pub(crate) schema: Option<Schema>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Definitions {
    #[prost(message, repeated, tag = "1")]
    pub(crate) additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct NamedSchema {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) value: Option<Schema>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Schema {
    #[prost(string, tag = "1")]
    pub(crate) r#ref: String,
    #[prost(string, tag = "2")]
    pub(crate) format: String,
    #[prost(string, tag = "4")]
    pub(crate) description: String,
    #[prost(string, repeated, tag = "19")]
    pub(crate) required: Vec<String>,
    #[prost(message, optional, boxed, tag = "21")]
    pub(crate) additional_properties: Option<Box<AdditionalPropertiesItem>>,
    #[prost(message, optional, tag = "22")]
    pub(crate) r#type: Option<TypeItem>,
    #[prost(message, optional, tag = "23")]
    pub(crate) items: Option<ItemsItem>,
    #[prost(message, optional, tag = "25")]
    pub(crate) properties: Option<Properties>,
    #[prost(message, repeated, tag = "31")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

/// `oneof { Schema schema = 1; bool boolean = 2; }`: only the first.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct AdditionalPropertiesItem {
    #[prost(message, optional, tag = "1")]
    pub(crate) schema: Option<Schema>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct TypeItem {
    #[prost(string, repeated, tag = "1")]
    pub(crate) value: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct ItemsItem {
    #[prost(message, repeated, tag = "1")]
    pub(crate) schema: Vec<Schema>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Properties {
    #[prost(message, repeated, tag = "1")]
    pub(crate) additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct NamedAny {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) value: Option<Any>,
}

/// gnostic's `Any`: field 1 (a `google.protobuf.Any`) is never used for extensions.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Any {
    #[prost(string, tag = "2")]
    pub(crate) yaml: String,
}

/// The v2 JSON document as gnostic protobuf bytes.
pub(crate) fn encode(document: &Value) -> Result<Vec<u8>, ApiError> {
    Ok(convert_document(document)?.encode_to_vec())
}

/// What cannot be encoded, and where.
fn unsupported(at: &str, what: &str) -> ApiError {
    ApiError::internal(format!(
        "the OpenAPI v2 document cannot be encoded as protobuf: {what} at {at}"
    ))
}

fn object<'a>(value: &'a Value, at: &str) -> Result<&'a Map<String, Value>, ApiError> {
    value
        .as_object()
        .ok_or_else(|| unsupported(at, "not an object"))
}

fn text(value: &Value, at: &str) -> Result<String, ApiError> {
    value
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| unsupported(at, "not a string"))
}

fn texts(value: &Value, at: &str) -> Result<Vec<String>, ApiError> {
    value
        .as_array()
        .ok_or_else(|| unsupported(at, "not a list"))?
        .iter()
        .map(|v| text(v, at))
        .collect()
}

fn flag(value: &Value, at: &str) -> Result<bool, ApiError> {
    value
        .as_bool()
        .ok_or_else(|| unsupported(at, "not a boolean"))
}

/// An `x-…` member, or an error for any other unknown member.
fn extension(key: &str, value: &Value, at: &str) -> Result<NamedAny, ApiError> {
    if !key.starts_with("x-") {
        return Err(unsupported(at, &format!("member {key:?}")));
    }
    let yaml = serde_json::to_string(value).map_err(|_| unsupported(at, key))?;
    Ok(NamedAny {
        name: key.to_owned(),
        value: Some(Any { yaml }),
    })
}

fn convert_document(value: &Value) -> Result<Document, ApiError> {
    let mut out = Document::default();
    for (key, v) in object(value, "/")? {
        match key.as_str() {
            "swagger" => out.swagger = text(v, "/swagger")?,
            "info" => out.info = Some(convert_info(v)?),
            "paths" => out.paths = Some(convert_paths(v)?),
            "definitions" => {
                out.definitions = Some(Definitions {
                    additional_properties: named_schemas(v, "/definitions")?,
                });
            }
            _ => out.vendor_extension.push(extension(key, v, "/")?),
        }
    }
    Ok(out)
}

fn convert_info(value: &Value) -> Result<Info, ApiError> {
    let mut out = Info::default();
    for (key, v) in object(value, "/info")? {
        match key.as_str() {
            "title" => out.title = text(v, "/info/title")?,
            "version" => out.version = text(v, "/info/version")?,
            "description" => out.description = text(v, "/info/description")?,
            _ => return Err(unsupported("/info", &format!("member {key:?}"))),
        }
    }
    Ok(out)
}

fn convert_paths(value: &Value) -> Result<Paths, ApiError> {
    let mut out = Paths::default();
    for (key, v) in object(value, "/paths")? {
        if key.starts_with('/') {
            out.path.push(NamedPathItem {
                name: key.clone(),
                value: Some(convert_path_item(v, key)?),
            });
        } else {
            out.vendor_extension.push(extension(key, v, "/paths")?);
        }
    }
    Ok(out)
}

fn convert_path_item(value: &Value, at: &str) -> Result<PathItem, ApiError> {
    let mut out = PathItem::default();
    for (key, v) in object(value, at)? {
        match key.as_str() {
            "post" => out.post = Some(convert_operation(v, at)?),
            "parameters" => out.parameters = convert_parameters(v, at)?,
            _ => out.vendor_extension.push(extension(key, v, at)?),
        }
    }
    Ok(out)
}

fn convert_operation(value: &Value, at: &str) -> Result<Operation, ApiError> {
    let mut out = Operation::default();
    for (key, v) in object(value, at)? {
        match key.as_str() {
            "tags" => out.tags = texts(v, at)?,
            "description" => out.description = text(v, at)?,
            "operationId" => out.operation_id = text(v, at)?,
            "produces" => out.produces = texts(v, at)?,
            "consumes" => out.consumes = texts(v, at)?,
            "schemes" => out.schemes = texts(v, at)?,
            "parameters" => out.parameters = convert_parameters(v, at)?,
            "responses" => out.responses = Some(convert_responses(v, at)?),
            _ => out.vendor_extension.push(extension(key, v, at)?),
        }
    }
    Ok(out)
}

fn convert_parameters(value: &Value, at: &str) -> Result<Vec<ParametersItem>, ApiError> {
    value
        .as_array()
        .ok_or_else(|| unsupported(at, "parameters that are not a list"))?
        .iter()
        .map(|p| {
            Ok(ParametersItem {
                parameter: Some(convert_parameter(p, at)?),
            })
        })
        .collect()
}

fn convert_parameter(value: &Value, at: &str) -> Result<Parameter, ApiError> {
    let fields = object(value, at)?;
    match fields.get("in").and_then(Value::as_str) {
        Some("body") => {
            let mut out = BodyParameter::default();
            for (key, v) in fields {
                match key.as_str() {
                    "description" => out.description = text(v, at)?,
                    "name" => out.name = text(v, at)?,
                    "in" => out.r#in = text(v, at)?,
                    "required" => out.required = flag(v, at)?,
                    "schema" => out.schema = Some(convert_schema(v, at)?),
                    _ => return Err(unsupported(at, &format!("body parameter member {key:?}"))),
                }
            }
            Ok(Parameter {
                body_parameter: Some(out),
                non_body_parameter: None,
            })
        }
        Some("path") => {
            let mut out = PathParameterSubSchema::default();
            for (key, v) in fields {
                match key.as_str() {
                    "required" => out.required = flag(v, at)?,
                    "in" => out.r#in = text(v, at)?,
                    "description" => out.description = text(v, at)?,
                    "name" => out.name = text(v, at)?,
                    "type" => out.r#type = text(v, at)?,
                    _ => return Err(unsupported(at, &format!("path parameter member {key:?}"))),
                }
            }
            Ok(Parameter {
                body_parameter: None,
                non_body_parameter: Some(NonBodyParameter {
                    path_parameter_sub_schema: Some(out),
                }),
            })
        }
        _ => Err(unsupported(
            at,
            "a parameter that is not in the body or path",
        )),
    }
}

fn convert_responses(value: &Value, at: &str) -> Result<Responses, ApiError> {
    let mut out = Responses::default();
    for (key, v) in object(value, at)? {
        if key.starts_with("x-") {
            out.vendor_extension.push(extension(key, v, at)?);
            continue;
        }
        let mut response = Response::default();
        for (member, v) in object(v, at)? {
            match member.as_str() {
                "description" => response.description = text(v, at)?,
                "schema" => {
                    response.schema = Some(SchemaItem {
                        schema: Some(convert_schema(v, at)?),
                    });
                }
                _ => return Err(unsupported(at, &format!("response member {member:?}"))),
            }
        }
        out.response_code.push(NamedResponseValue {
            name: key.clone(),
            value: Some(ResponseValue {
                response: Some(response),
            }),
        });
    }
    Ok(out)
}

fn named_schemas(value: &Value, at: &str) -> Result<Vec<NamedSchema>, ApiError> {
    object(value, at)?
        .iter()
        .map(|(name, v)| {
            Ok(NamedSchema {
                name: name.clone(),
                value: Some(convert_schema(v, &format!("{at}/{name}"))?),
            })
        })
        .collect()
}

fn convert_schema(value: &Value, at: &str) -> Result<Schema, ApiError> {
    let mut out = Schema::default();
    for (key, v) in object(value, at)? {
        match key.as_str() {
            "$ref" => out.r#ref = text(v, at)?,
            "format" => out.format = text(v, at)?,
            "description" => out.description = text(v, at)?,
            "required" => out.required = texts(v, at)?,
            "type" => {
                out.r#type = Some(TypeItem {
                    value: vec![text(v, at)?],
                });
            }
            "items" => {
                out.items = Some(ItemsItem {
                    schema: vec![convert_schema(v, at)?],
                });
            }
            "additionalProperties" => {
                out.additional_properties = Some(Box::new(AdditionalPropertiesItem {
                    schema: Some(convert_schema(v, at)?),
                }));
            }
            "properties" => {
                out.properties = Some(Properties {
                    additional_properties: named_schemas(v, at)?,
                });
            }
            _ => out.vendor_extension.push(extension(key, v, at)?),
        }
    }
    Ok(out)
}

/// The reverse, for tests: the JSON a decoded message stands for.
#[cfg(test)]
pub(crate) mod to_json {
    use serde_json::{Map, Value, json};

    use super::*;

    fn put(map: &mut Map<String, Value>, key: &str, value: Value) {
        let empty = match &value {
            Value::String(s) => s.is_empty(),
            Value::Array(a) => a.is_empty(),
            Value::Bool(b) => !b,
            _ => false,
        };
        if !empty {
            map.insert(key.to_owned(), value);
        }
    }

    fn extensions(map: &mut Map<String, Value>, all: &[NamedAny]) {
        for e in all {
            let yaml = &e.value.as_ref().unwrap().yaml;
            // It must read as YAML (what gnostic's users parse it as) and mean the same.
            let from_yaml: Value = serde_saphyr::from_str(yaml).unwrap();
            let from_json: Value = serde_json::from_str(yaml).unwrap();
            assert_eq!(from_yaml, from_json, "{yaml}");
            map.insert(e.name.clone(), from_json);
        }
    }

    pub(crate) fn document(d: &Document) -> Value {
        let mut out = Map::new();
        put(&mut out, "swagger", json!(d.swagger));
        if let Some(info) = &d.info {
            let mut i = Map::new();
            put(&mut i, "title", json!(info.title));
            put(&mut i, "version", json!(info.version));
            put(&mut i, "description", json!(info.description));
            out.insert("info".into(), i.into());
        }
        if let Some(paths) = &d.paths {
            let mut p = Map::new();
            for item in &paths.path {
                p.insert(item.name.clone(), path_item(item.value.as_ref().unwrap()));
            }
            extensions(&mut p, &paths.vendor_extension);
            out.insert("paths".into(), p.into());
        }
        if let Some(definitions) = &d.definitions {
            out.insert(
                "definitions".into(),
                named(&definitions.additional_properties),
            );
        }
        extensions(&mut out, &d.vendor_extension);
        Value::Object(out)
    }

    fn path_item(item: &PathItem) -> Value {
        let mut out = Map::new();
        if let Some(post) = &item.post {
            out.insert("post".into(), operation(post));
        }
        put(&mut out, "parameters", parameters(&item.parameters));
        extensions(&mut out, &item.vendor_extension);
        Value::Object(out)
    }

    fn operation(op: &Operation) -> Value {
        let mut out = Map::new();
        put(&mut out, "tags", json!(op.tags));
        put(&mut out, "description", json!(op.description));
        put(&mut out, "operationId", json!(op.operation_id));
        put(&mut out, "produces", json!(op.produces));
        put(&mut out, "consumes", json!(op.consumes));
        put(&mut out, "schemes", json!(op.schemes));
        put(&mut out, "parameters", parameters(&op.parameters));
        if let Some(responses) = &op.responses {
            let mut r = Map::new();
            for code in &responses.response_code {
                let response = code.value.as_ref().unwrap().response.as_ref().unwrap();
                let mut body = Map::new();
                put(&mut body, "description", json!(response.description));
                if let Some(item) = &response.schema {
                    body.insert("schema".into(), schema(item.schema.as_ref().unwrap()));
                }
                r.insert(code.name.clone(), body.into());
            }
            extensions(&mut r, &responses.vendor_extension);
            out.insert("responses".into(), r.into());
        }
        extensions(&mut out, &op.vendor_extension);
        Value::Object(out)
    }

    fn parameters(all: &[ParametersItem]) -> Value {
        all.iter()
            .map(|item| {
                let p = item.parameter.as_ref().unwrap();
                let mut out = Map::new();
                if let Some(body) = &p.body_parameter {
                    put(&mut out, "description", json!(body.description));
                    put(&mut out, "name", json!(body.name));
                    put(&mut out, "in", json!(body.r#in));
                    put(&mut out, "required", json!(body.required));
                    out.insert("schema".into(), schema(body.schema.as_ref().unwrap()));
                } else {
                    let path = p
                        .non_body_parameter
                        .as_ref()
                        .unwrap()
                        .path_parameter_sub_schema
                        .as_ref()
                        .unwrap();
                    put(&mut out, "required", json!(path.required));
                    put(&mut out, "in", json!(path.r#in));
                    put(&mut out, "description", json!(path.description));
                    put(&mut out, "name", json!(path.name));
                    put(&mut out, "type", json!(path.r#type));
                }
                Value::Object(out)
            })
            .collect()
    }

    fn named(all: &[NamedSchema]) -> Value {
        Value::Object(
            all.iter()
                .map(|n| (n.name.clone(), schema(n.value.as_ref().unwrap())))
                .collect(),
        )
    }

    fn schema(s: &Schema) -> Value {
        let mut out = Map::new();
        put(&mut out, "$ref", json!(s.r#ref));
        put(&mut out, "format", json!(s.format));
        put(&mut out, "description", json!(s.description));
        put(&mut out, "required", json!(s.required));
        if let Some(ty) = &s.r#type {
            assert_eq!(ty.value.len(), 1);
            out.insert("type".into(), json!(ty.value[0]));
        }
        if let Some(items) = &s.items {
            assert_eq!(items.schema.len(), 1);
            out.insert("items".into(), schema(&items.schema[0]));
        }
        if let Some(additional) = &s.additional_properties {
            out.insert(
                "additionalProperties".into(),
                schema(additional.schema.as_ref().unwrap()),
            );
        }
        if let Some(properties) = &s.properties {
            out.insert(
                "properties".into(),
                named(&properties.additional_properties),
            );
        }
        extensions(&mut out, &s.vendor_extension);
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn unknown_members_are_errors_not_omissions() {
        let doc =
            json!({"swagger": "2.0", "definitions": {"a": {"type": "string", "enum": ["x"]}}});
        let err = encode(&doc).unwrap_err();
        assert!(err.message().contains("\"enum\""), "{}", err.message());
        let doc = json!({"swagger": "2.0", "paths": {"/a": {"get": {}}}});
        assert!(encode(&doc).is_err());
    }

    #[test]
    fn field_numbers_are_gnostics() {
        // Document { swagger = 1: "2.0", definitions = 9: Definitions { additional_properties
        // = 1: NamedSchema { name = 1: "T", value = 2: Schema { type = 22: TypeItem { value =
        // 1: "string" } } } } }, written out by hand.
        let doc = json!({"swagger": "2.0", "definitions": {"T": {"type": "string"}}});
        let type_item = [&[0x0a, 6][..], b"string"].concat();
        let schema = [&[0xb2, 0x01, 8][..], &type_item].concat();
        let named = [&[0x0a, 1, b'T', 0x12, 11][..], &schema].concat();
        let definitions = [&[0x0a, 16][..], &named].concat();
        let expected = [&[0x0a, 3, b'2', b'.', b'0', 0x4a, 18][..], &definitions].concat();
        assert_eq!(encode(&doc).unwrap(), expected);
    }
}
