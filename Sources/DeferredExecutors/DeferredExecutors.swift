// Executors that need Foundation or own threads live in this module, so that the core
// `Deferred` module stays free of Foundation. Importing `DeferredExecutors` imports the core.
@_exported public import Deferred
