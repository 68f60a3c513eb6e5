"""The sweep axes that are not packages of their own (`models/`, `losses/`): one small module each for
`precision`, `compile` (`apply_compile`) and the fake `data`."""
