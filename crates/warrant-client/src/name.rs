//! `NAMESPACE/NAME`: how a namespaced object (a service account, a Secret, a Lease) is named on
//! warrant's command lines and in a cluster's exec extension (`serviceAccount`).

/// A namespaced object's `NAMESPACE/NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectName {
    /// The namespace.
    pub namespace: String,
    /// The name.
    pub name: String,
}

impl std::fmt::Display for ObjectName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Why a `NAMESPACE/NAME` value is refused (clap shows the message after the flag's name).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObjectNameError {
    /// No `/`.
    #[error("{0:?} is not NAMESPACE/NAME")]
    NoSlash(String),
    /// The namespace is not a DNS label.
    #[error("{0:?} is not a valid namespace: lower-case letters, digits and '-', at most 63")]
    Namespace(String),
    /// The name is not a DNS subdomain.
    #[error(
        "{0:?} is not a valid object name: lower-case letters, digits, '-' and '.', at most 253"
    )]
    Name(String),
}

/// Parses `NAMESPACE/NAME`: a namespace (a DNS label) and an object name (a DNS subdomain), as
/// Kubernetes names them.
pub fn parse_object_name(text: &str) -> Result<ObjectName, ObjectNameError> {
    let (namespace, name) = text
        .split_once('/')
        .ok_or_else(|| ObjectNameError::NoSlash(text.to_owned()))?;
    let valid = |part: &str, max: usize, dots: bool| {
        !part.is_empty()
            && part.len() <= max
            && part.chars().all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || (dots && c == '.')
            })
            && part.starts_with(|c: char| c.is_ascii_alphanumeric())
            && part.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    if !valid(namespace, 63, false) {
        return Err(ObjectNameError::Namespace(namespace.to_owned()));
    }
    if !valid(name, 253, true) {
        return Err(ObjectNameError::Name(name.to_owned()));
    }
    Ok(ObjectName {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A namespace is a DNS label, a name a DNS subdomain; the message names what is wrong.
    #[test]
    fn names_are_kubernetes_names() {
        let parsed = parse_object_name("demo/app.v2").unwrap();
        assert_eq!(parsed.to_string(), "demo/app.v2");
        for (bad, says) in [
            ("demo", "is not NAMESPACE/NAME"),
            ("de.mo/app", "is not a valid namespace"),
            ("demo/App", "is not a valid object name"),
            ("demo/-app", "is not a valid object name"),
            ("/app", "is not a valid namespace"),
        ] {
            let message = parse_object_name(bad).unwrap_err().to_string();
            assert!(message.contains(says), "{bad}: {message}");
        }
    }
}
