//! `/openapi/v3`: an index of group-versions, and one OpenAPI 3.0 document per group-version.
//! kubectl reads these first (for `explain`, and to ask whether the server validates fields
//! itself: it does if a PATCH for the kind takes `fieldValidation`; warrant has no PATCH).

use serde_json::{Map, Value, json};

use super::endpoints::{CONSUMES, Operation, PRODUCES, operations};
use super::schema::{Definition, Dialect, closure};
use warrant_server::tooling::GroupVersion;

/// The document for `group_version`.
pub(crate) fn document(group_version: GroupVersion, catalogue: &[Definition]) -> Value {
    let operations = operations();
    let endpoints: Vec<&Operation> = operations
        .iter()
        .filter(|e| e.group_version == group_version)
        .collect();
    let paths: Map<String, Value> = endpoints
        .iter()
        .map(|e| (e.path.to_owned(), path_item(e)))
        .collect();
    // Each group-version document stands alone, so it names every kind its types are.
    let schemas: Map<String, Value> = closure(catalogue, endpoints.iter().map(|e| e.body))
        .into_iter()
        .map(|d| (d.name.to_owned(), d.render(Dialect::V3, |_| true)))
        .collect();
    json!({
        "openapi": "3.0.0",
        "info": super::info(),
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

/// The index: each group-version's document and the URL to fetch it from, which carries a
/// hash of the document so that clients can cache it for good.
pub(crate) fn index(entries: impl IntoIterator<Item = (String, String)>) -> Value {
    let paths: Map<String, Value> = entries
        .into_iter()
        .map(|(path, hash)| {
            let url = format!("/openapi/v3/{path}?hash={hash}");
            (path, json!({"serverRelativeURL": url}))
        })
        .collect();
    json!({"paths": paths})
}

fn path_item(endpoint: &Operation) -> Value {
    let reference = json!({"$ref": Dialect::V3.reference(endpoint.body)});
    let content = |types: &[&str]| -> Map<String, Value> {
        types
            .iter()
            .map(|t| ((*t).to_owned(), json!({"schema": reference})))
            .collect()
    };
    let post = json!({
        "description": endpoint.description,
        "operationId": endpoint.operation_id,
        "tags": [endpoint.tag()],
        "requestBody": {"content": content(CONSUMES), "required": true},
        "responses": {
            "201": {"description": "Created", "content": content(PRODUCES)},
            "401": {"description": "Unauthorized"},
        },
        "x-kubernetes-action": "post",
    });
    endpoint.path_item(post, |p| {
        json!({
            "name": p.name,
            "in": "path",
            "required": true,
            "description": p.description,
            "schema": {"type": "string"},
        })
    })
}

#[cfg(test)]
mod tests {
    use super::super::definitions::catalogue;
    use super::super::schema::GVK_EXTENSION;
    use super::*;
    use warrant_server::tooling::{AUTHENTICATION_V1, CORE_V1, WARRANT_V1ALPHA1};

    #[test]
    fn each_group_version_has_its_own_operations() {
        let doc = document(AUTHENTICATION_V1, &catalogue());
        assert_eq!(doc["openapi"], "3.0.0");
        let paths: Vec<&String> = doc["paths"].as_object().unwrap().keys().collect();
        assert_eq!(paths, ["/apis/authentication.k8s.io/v1/tokenreviews"]);
        let post = &doc["paths"]["/apis/authentication.k8s.io/v1/tokenreviews"]["post"];
        assert_eq!(
            post[GVK_EXTENSION],
            json!({"group": "authentication.k8s.io", "kind": "TokenReview", "version": "v1"})
        );
        assert_eq!(
            post["requestBody"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/io.k8s.api.authentication.v1.TokenReview"
        );
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        assert!(
            !schemas.contains_key("io.k8s.api.authentication.v1.TokenRequest"),
            "only what the group-version's operations use"
        );
        assert_eq!(
            schemas["io.k8s.api.authentication.v1.TokenReview"]["properties"]["metadata"]["allOf"]
                [0]["$ref"],
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );

        let core = document(CORE_V1, &catalogue());
        assert_eq!(
            core["paths"]["/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"]["parameters"]
                [0]["name"],
            "name"
        );
        let warrant = document(WARRANT_V1ALPHA1, &catalogue());
        assert_eq!(warrant["paths"].as_object().unwrap().len(), 2);
        assert_eq!(
            warrant["paths"]["/apis/warrant.dev/v1alpha1/tokenreviews"]["post"]["requestBody"]["content"]
                ["application/json"]["schema"]["$ref"],
            "#/components/schemas/dev.warrant.v1alpha1.TokenReview"
        );
        assert!(
            !schemas.contains_key("dev.warrant.v1alpha1.TokenReview"),
            "kube's group-version describes kube's TokenReview only"
        );
    }

    #[test]
    fn index_links_each_document_with_its_hash() {
        assert_eq!(
            index([("api/v1".to_owned(), "AB12".to_owned())]),
            json!({"paths": {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=AB12"}}})
        );
    }
}
