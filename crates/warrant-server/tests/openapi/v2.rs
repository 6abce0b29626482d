//! `/openapi/v2`: one Swagger 2.0 document for the whole API. kubectl validates manifests
//! against its definitions; kube-apiserver's aggregator merges it into the cluster's.

use serde_json::{Map, Value, json};

use super::endpoints::{CONSUMES, Operation, PRODUCES, View, operations};
use super::schema::{Definition, Dialect, closure};

/// The document `view` describes.
pub(crate) fn document(view: View, catalogue: &[Definition]) -> Value {
    let operations = operations();
    let endpoints: Vec<&Operation> = operations.iter().filter(|e| view.describes(e)).collect();
    let paths: Map<String, Value> = endpoints
        .iter()
        .map(|e| (e.path.to_owned(), path_item(e)))
        .collect();
    let definitions: Map<String, Value> = closure(catalogue, endpoints.iter().map(|e| e.body))
        .into_iter()
        .map(|d| (d.name.to_owned(), d.render(Dialect::V2, |k| view.claims(k))))
        .collect();
    json!({
        "swagger": "2.0",
        "info": super::info(),
        "paths": paths,
        "definitions": definitions,
    })
}

fn path_item(endpoint: &Operation) -> Value {
    let reference = json!({"$ref": Dialect::V2.reference(endpoint.body)});
    let post = json!({
        "description": endpoint.description,
        "operationId": endpoint.operation_id,
        "tags": [endpoint.tag()],
        "schemes": ["https"],
        "consumes": CONSUMES,
        "produces": PRODUCES,
        "parameters": [{
            "name": "body",
            "in": "body",
            "required": true,
            "schema": reference,
        }],
        "responses": {
            "201": {"description": "Created", "schema": reference},
            "401": {"description": "Unauthorized"},
        },
        "x-kubernetes-action": "post",
    });
    endpoint.path_item(post, |p| {
        json!({
            "name": p.name,
            "in": "path",
            "required": true,
            "type": "string",
            "description": p.description,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::super::definitions::catalogue;
    use super::super::schema::GVK_EXTENSION;
    use super::*;

    #[test]
    fn direct_view_describes_every_endpoint_with_kinds() {
        let doc = document(View::Direct, &catalogue());
        let paths: Vec<&String> = doc["paths"].as_object().unwrap().keys().collect();
        assert_eq!(
            paths,
            [
                "/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
                "/apis/authentication.k8s.io/v1/tokenreviews",
                "/apis/warrant.dev/v1alpha1/namespaces/{namespace}/serviceaccounts/{name}/token",
                "/apis/warrant.dev/v1alpha1/tokenreviews",
            ]
        );
        let review = &doc["definitions"]["io.k8s.api.authentication.v1.TokenReview"];
        assert_eq!(
            review[GVK_EXTENSION],
            json!([{"group": "authentication.k8s.io", "kind": "TokenReview", "version": "v1"}])
        );
        // warrant's own TokenReview is a type of its own: kube's, and the proof of a key.
        let own = &doc["definitions"]["dev.warrant.v1alpha1.TokenReview"];
        assert_eq!(
            own[GVK_EXTENSION],
            json!([{"group": "warrant.dev", "kind": "TokenReview", "version": "v1alpha1"}])
        );
        assert_eq!(
            own["properties"]["spec"]["$ref"],
            "#/definitions/dev.warrant.v1alpha1.TokenReviewSpec"
        );
        let spec = &doc["definitions"]["dev.warrant.v1alpha1.TokenReviewSpec"]["properties"];
        assert_eq!(
            spec["dpop"]["$ref"],
            "#/definitions/dev.warrant.v1alpha1.DPoPProof"
        );
        assert_eq!(spec["certificateThumbprint"]["type"], "string");
        assert!(
            doc["definitions"]["io.k8s.api.authentication.v1.TokenReviewSpec"]["properties"]
                .get("dpop")
                .is_none(),
            "kube's TokenReview has no proof fields"
        );
        assert_eq!(
            doc["paths"]["/apis/warrant.dev/v1alpha1/tokenreviews"]["post"]["parameters"][0]["schema"]
                ["$ref"],
            "#/definitions/dev.warrant.v1alpha1.TokenReview"
        );
        assert_eq!(
            doc["definitions"]["io.k8s.api.authentication.v1.TokenRequest"][GVK_EXTENSION],
            json!([{"group": "authentication.k8s.io", "kind": "TokenRequest", "version": "v1"}])
        );
        assert_eq!(
            review["properties"]["spec"]["$ref"],
            "#/definitions/io.k8s.api.authentication.v1.TokenReviewSpec"
        );
        // Only POST: kubectl must find no PATCH, so that it validates manifests itself.
        for item in doc["paths"].as_object().unwrap().values() {
            let methods: Vec<&String> = item
                .as_object()
                .unwrap()
                .keys()
                .filter(|k| *k != "parameters")
                .collect();
            assert_eq!(methods, ["post"]);
        }
    }

    #[test]
    fn aggregated_view_claims_only_warrants_kinds() {
        let doc = document(View::Aggregated, &catalogue());
        let paths: Vec<&String> = doc["paths"].as_object().unwrap().keys().collect();
        assert!(
            paths
                .iter()
                .all(|p| p.starts_with("/apis/warrant.dev/v1alpha1/")),
            "{paths:?}"
        );
        assert!(
            doc["definitions"]
                .get("io.k8s.api.authentication.v1.TokenReview")
                .is_none(),
            "kube's TokenReview is not warrant's to describe to the aggregator"
        );
        assert_eq!(
            doc["definitions"]["dev.warrant.v1alpha1.TokenReview"][GVK_EXTENSION],
            json!([{"group": "warrant.dev", "kind": "TokenReview", "version": "v1alpha1"}])
        );
        assert!(
            doc["definitions"]["io.k8s.api.authentication.v1.TokenRequest"]
                .get(GVK_EXTENSION)
                .is_none()
        );
    }

    #[test]
    fn definitions_are_only_those_used() {
        let doc = document(View::Direct, &catalogue());
        let names: Vec<&String> = doc["definitions"].as_object().unwrap().keys().collect();
        assert_eq!(names.len(), catalogue().len(), "{names:?}");
    }
}
