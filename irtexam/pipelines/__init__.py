"""irtexam.pipelines"""
