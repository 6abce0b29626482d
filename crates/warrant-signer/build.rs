//! Compiles proto/externaljwt.proto with protox (pure Rust: no protoc on the machines that
//! build warrant) into the prost messages and the tonic service, in OUT_DIR.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/externaljwt.proto");
    let descriptors = protox::compile(["proto/externaljwt.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // Clients are generic over the transport: tests bring their own (a Unix socket).
        .build_transport(false)
        .compile_fds(descriptors)?;
    Ok(())
}
