//! `droidwarden`: the binary. All of it is the library's command line
//! ([`droidwarden::main`]); tests run the same daemon in-process.

fn main() -> std::process::ExitCode {
    droidwarden::main()
}
