//! Certificates made with openssl, as an operator makes them: CAs, client certificates with
//! the client-auth usage, and serving certificates for 127.0.0.1.

use std::path::{Path, PathBuf};

/// Runs openssl in `dir`, failing the test with its stderr if it fails; its stdout.
pub(crate) fn openssl(dir: &Path, args: &[&str]) -> String {
    let out = warrant_testkit::tools::command("openssl", "the openssl command")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl is required");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A CA in `dir`: `<name>.crt` and `<name>.key`.
pub(crate) fn ca(dir: &Path, name: &str) -> PathBuf {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
            "-subj",
            &format!("/CN={name}"),
            "-days",
            "1",
        ],
    );
    dir.join(format!("{name}.crt"))
}

/// A certificate `<name>.crt`/`<name>.key` signed by CA `ca`, for `subject`, with the
/// extensions in `ext` (an openssl extension file's lines).
pub(crate) fn issue(dir: &Path, ca: &str, name: &str, subject: &str, ext: &str) {
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
            "-subj",
            subject,
        ],
    );
    let ext_file = format!("{name}.ext");
    std::fs::write(dir.join(&ext_file), ext).unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.crt"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-out",
            &format!("{name}.crt"),
            "-days",
            "1",
            "-extfile",
            &ext_file,
        ],
    );
}

/// A client certificate (client-auth usage) for `cn` in organisation `o`.
pub(crate) fn client(dir: &Path, ca: &str, name: &str, cn: &str, o: &str) {
    let subject = if o.is_empty() {
        format!("/CN={cn}")
    } else {
        format!("/CN={cn}/O={o}")
    };
    issue(dir, ca, name, &subject, "extendedKeyUsage=clientAuth\n");
}

/// A reqwest identity from `<name>.crt` and `<name>.key`.
pub(crate) fn identity(dir: &Path, name: &str) -> reqwest::Identity {
    let mut pem = std::fs::read(dir.join(format!("{name}.crt"))).unwrap();
    pem.extend(std::fs::read(dir.join(format!("{name}.key"))).unwrap());
    reqwest::Identity::from_pem(&pem).unwrap()
}
