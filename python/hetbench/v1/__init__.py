"""The API's modules, generated from proto/ when the package is built."""
